//! The attach protocol's messages and frames, as both ends write and read
//! them: the greeting line, the framing with its bounds, and the JSON
//! bodies (the protocol's steps are on [`VERSION`]).
//!
//! Pure encoding and bounded reading: it opens no socket and decides
//! nothing. It holds that every read is bounded ([`MAX_LINE`],
//! [`MAX_CLIENT_FRAME`], [`MAX_SERVER_FRAME`]).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt,
};

/// The protocol's version, in the greeting. Version 1:
///
/// 1. The server accepts, checks the peer's uid, and writes one line:
///    `shellkeep-attach 1` (the version) or a refusal (`shellkeep: refused:
///    …`), after which it closes. A line is at most 256 bytes.
/// 2. Then both sides write frames: a kind byte, the payload's length (4
///    bytes, big-endian), the payload. Client frames are at most 4 KiB,
///    server frames at most 1 MiB (output at most 64 KiB a frame).
/// 3. The client sends one `H` frame, its request as JSON: `{"op":"list"}`
///    or `{"op":"attach","session":…,"write":…,"since_secs":…,
///    "show_secrets":…,"window":{"rows":…,"cols":…}}`, within 10 s.
/// 4. To `list`, the server answers one `L` frame (the server and its
///    sessions, JSON) and closes. To `attach`, it answers `R` (refused,
///    `{"error":…}`) and closes, or `A` (JSON: server pid, session, its
///    window, whether writing was granted or someone else holds it since
///    when, whether output is masked); then `O` frames (the terminal's
///    output: first the replay, then live) and `E` frames (JSON events:
///    `live` after the replay, `skipped` when the viewer was too slow,
///    `resize`, `shell_ended`, `reset`, `waiting`, and the last one,
///    `closed` or `server_ended`).
/// 5. The client may send `K` frames (keys; typed only when writing was
///    granted) and `W` frames (its window, JSON). Closing the connection
///    detaches; the session is not touched.
pub(super) const VERSION: u32 = 1;

/// What the server writes first to a peer it accepts, before any frame.
pub(super) const GREETING: &str = "shellkeep-attach 1\n";

/// The start of every greeting, whatever its version.
pub(super) const GREETING_PREFIX: &str = "shellkeep-attach ";

/// The longest first line either end reads: the greeting or a refusal.
pub(super) const MAX_LINE: usize = 256;

/// The largest frame a client may send (its request, keys, window size):
/// a larger one ends the connection.
pub(super) const MAX_CLIENT_FRAME: usize = 4096;

/// The largest frame the server sends; output is cut into frames of at
/// most [`MAX_OUTPUT_FRAME`] bytes, a listing is far below this.
pub(super) const MAX_SERVER_FRAME: usize = 1024 * 1024;

/// The most output bytes in one frame.
pub(super) const MAX_OUTPUT_FRAME: usize = 64 * 1024;

/// The longest `--since` a client may ask for: the command line's own
/// bound, which the listening end applies too.
pub(super) use crate::cli::MAX_SINCE;

/// The kind of a frame: its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Client: its one request ([`Request`], JSON).
    Hello,
    /// Client: keys for the session (write mode), raw bytes.
    Keys,
    /// Client: its terminal's size ([`Window`], JSON).
    Window,
    /// Server: the answer to [`Request::List`] ([`Listing`], JSON).
    Listing,
    /// Server: the attach request is granted ([`Accepted`], JSON).
    Accepted,
    /// Server: the request is refused ([`Refused`], JSON); the connection ends.
    Refused,
    /// Server: terminal output, masked unless the viewer asked otherwise.
    Output,
    /// Server: something happened to the session ([`Event`], JSON).
    Event,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Hello => b'H',
            Kind::Keys => b'K',
            Kind::Window => b'W',
            Kind::Listing => b'L',
            Kind::Accepted => b'A',
            Kind::Refused => b'R',
            Kind::Output => b'O',
            Kind::Event => b'E',
        }
    }

    fn from_byte(byte: u8) -> Option<Kind> {
        Some(match byte {
            b'H' => Kind::Hello,
            b'K' => Kind::Keys,
            b'W' => Kind::Window,
            b'L' => Kind::Listing,
            b'A' => Kind::Accepted,
            b'R' => Kind::Refused,
            b'O' => Kind::Output,
            b'E' => Kind::Event,
            _ => return None,
        })
    }
}

/// One frame: its kind and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Frame {
    /// What the payload is.
    pub kind: Kind,
    /// The payload: JSON or raw bytes, as the kind says.
    pub payload: Vec<u8>,
}

impl Frame {
    /// A frame of `kind` holding `value` as JSON.
    pub(super) fn json(kind: Kind, value: &impl Serialize) -> Frame {
        // Our own types always serialize.
        Frame { kind, payload: serde_json::to_vec(value).unwrap_or_default() }
    }

    /// The payload read as JSON of type `T`.
    pub(super) fn parse<T: for<'de> Deserialize<'de>>(&self) -> std::io::Result<T> {
        serde_json::from_slice(&self.payload).map_err(|err| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad {:?}: {err}", self.kind),
            )
        })
    }
}

/// Writes `frame`: its kind byte, its length (4 bytes, big-endian), its
/// payload.
pub(super) async fn write_frame(
    out: &mut (impl AsyncWrite + Unpin),
    frame: &Frame,
) -> std::io::Result<()> {
    let len = u32::try_from(frame.payload.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too large"))?;
    let mut bytes = Vec::with_capacity(5 + frame.payload.len());
    bytes.push(frame.kind.byte());
    bytes.extend_from_slice(&len.to_be_bytes());
    bytes.extend_from_slice(&frame.payload);
    out.write_all(&bytes).await?;
    out.flush().await
}

/// Reads one frame of at most `max` bytes of payload; `None` at a clean
/// end of the stream (between frames). An unknown kind, a frame past
/// `max` or a stream cut inside a frame is an error.
pub(super) async fn read_frame(
    input: &mut (impl AsyncRead + Unpin),
    max: usize,
) -> std::io::Result<Option<Frame>> {
    let mut head = [0u8; 5];
    match input.read_exact(&mut head[..1]).await {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err),
    }
    input.read_exact(&mut head[1..]).await?;
    let kind = Kind::from_byte(head[0]).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unknown frame {:#04x}", head[0]),
        )
    })?;
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (at most {max})"),
        ));
    }
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).await?;
    Ok(Some(Frame { kind, payload }))
}

/// Reads the first line (at most [`MAX_LINE`] bytes, without its newline):
/// the greeting or a refusal.
pub(super) async fn read_line(input: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut limited = input.take(MAX_LINE as u64);
    limited.read_until(b'\n', &mut line).await?;
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// A client's one request, the payload of its [`Kind::Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum Request {
    /// The server and its sessions, for `shellkeep ls`.
    List,
    /// Watch a session (and perhaps type into it).
    Attach(AttachRequest),
}

/// What `shellkeep attach` asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct AttachRequest {
    /// The session's name.
    pub session: String,
    /// Whether the person wants to type (a hold on the session).
    pub write: bool,
    /// Replay only the output of this many last seconds (else all the
    /// replay ring holds).
    pub since_secs: Option<f64>,
    /// Show the raw stream, unmasked.
    pub show_secrets: bool,
    /// The viewer's terminal, when it has one.
    pub window: Option<Window>,
}

/// A terminal's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Window {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

/// Whether the viewer may type.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(super) enum Writing {
    /// Read-only, as asked.
    ReadOnly,
    /// The viewer holds the session: its keys go to the program.
    Granted,
    /// Asked for, but someone else holds the session since `since` (Unix
    /// seconds): the view is read-only.
    HeldElsewhere {
        /// When the other person took it.
        since: f64,
    },
}

/// The server's answer to an attach request it grants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Accepted {
    /// The server's process id.
    pub server_pid: u32,
    /// The session's name.
    pub session: String,
    /// The session's window (the agent's size, which wins).
    pub window: Window,
    /// Whether the viewer may type.
    pub writing: Writing,
    /// Whether the output is masked.
    pub masked: bool,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Refused {
    /// In words, for the person.
    pub error: String,
}

/// What happened to the session, between pieces of output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(super) enum Event {
    /// The replay is over: what follows is live. `cut`: the replay ring had
    /// already dropped older output inside the span asked for.
    Live {
        /// Older output is missing from the replay.
        cut: bool,
    },
    /// The viewer was too slow: this many pieces of output were skipped.
    Skipped {
        /// Pieces skipped.
        taps: u64,
    },
    /// The session's window changed.
    Resize {
        /// The new window.
        window: Window,
    },
    /// The session's shell ended.
    ShellEnded {
        /// How, in words.
        how: String,
    },
    /// The session's shell was replaced (a reset): its replay follows.
    Reset,
    /// The session has no shell now; the view waits for its next one.
    Waiting,
    /// The session was closed: the connection ends.
    Closed,
    /// The server is ending: the connection ends.
    ServerEnded,
}

/// The answer to [`Request::List`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Listing {
    /// The server's process id.
    pub pid: u32,
    /// The directory its sessions start in.
    pub start_dir: String,
    /// The MCP client's name, once it has said it.
    pub client: Option<String>,
    /// When the server started (Unix seconds).
    pub started: f64,
    /// Its open sessions, `default` first.
    pub sessions: Vec<SessionRow>,
}

/// One session in a [`Listing`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct SessionRow {
    /// Its name.
    pub name: String,
    /// `not started`, `idle`, `running` or `finished`.
    pub state: String,
    /// The command it runs (or ran, when finished).
    pub command: Option<String>,
    /// For how long it has been running, in seconds.
    pub running_secs: Option<f64>,
    /// How many people watch it (the writer included).
    pub watchers: u32,
    /// Since when a person holds it for writing (Unix seconds).
    pub writer_since: Option<f64>,
}

/// `time` as Unix seconds (0 before 1970).
pub(super) fn unix_secs(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH).map_or(0.0, |since| since.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames come back as they were written, one after the other, and the
    /// stream's end between frames is a clean end.
    #[tokio::test]
    async fn frames_round_trip() {
        let frames = [
            Frame::json(Kind::Hello, &Request::List),
            Frame { kind: Kind::Keys, payload: b"\x03".to_vec() },
            Frame { kind: Kind::Output, payload: Vec::new() },
            Frame::json(Kind::Event, &Event::Skipped { taps: 3 }),
        ];
        let mut bytes = Vec::new();
        for frame in &frames {
            write_frame(&mut bytes, frame).await.expect("write");
        }
        let mut input = bytes.as_slice();
        for frame in &frames {
            assert_eq!(read_frame(&mut input, 100).await.expect("read").as_ref(), Some(frame));
        }
        assert_eq!(read_frame(&mut input, 100).await.expect("end"), None);
    }

    /// A frame past the bound, of an unknown kind, or cut short is an
    /// error, never a huge allocation or a hang.
    #[tokio::test]
    async fn bad_frames_are_errors() {
        let mut big = Vec::new();
        write_frame(&mut big, &Frame { kind: Kind::Keys, payload: vec![0; 10] }).await.expect("w");
        let err = read_frame(&mut big.as_slice(), 9).await.expect_err("too big");
        assert!(err.to_string().contains("at most 9"), "{err}");
        let err = read_frame(&mut &b"Z\0\0\0\0"[..], 9).await.expect_err("unknown");
        assert!(err.to_string().contains("unknown frame"), "{err}");
        let huge = [b'O', 0xff, 0xff, 0xff, 0xff];
        assert!(read_frame(&mut &huge[..], MAX_SERVER_FRAME).await.is_err());
        let cut = [b'K', 0, 0, 0, 4, b'a'];
        assert!(read_frame(&mut &cut[..], 9).await.is_err());
        let head_only = [b'K', 0, 0];
        assert!(read_frame(&mut &head_only[..], 9).await.is_err());
    }

    /// The first line is read up to its newline and never past the bound.
    #[tokio::test]
    async fn the_first_line_is_bounded() {
        let mut input = GREETING.as_bytes();
        assert_eq!(read_line(&mut input).await.expect("line"), GREETING.trim_end());
        let long = vec![b'x'; 10_000];
        let line = read_line(&mut long.as_slice()).await.expect("line");
        assert_eq!(line.len(), MAX_LINE);
    }

    /// The JSON bodies keep their documented shape (other implementations
    /// of the protocol read them).
    #[test]
    fn bodies_have_their_documented_shape() {
        let request = Request::Attach(AttachRequest {
            session: "default".into(),
            write: true,
            since_secs: Some(300.0),
            show_secrets: false,
            window: Some(Window { rows: 24, cols: 80 }),
        });
        expect_test::expect![[r#"{"op":"attach","session":"default","write":true,"since_secs":300.0,"show_secrets":false,"window":{"rows":24,"cols":80}}"#]]
            .assert_eq(&serde_json::to_string(&request).expect("json"));
        expect_test::expect![[r#"{"state":"held_elsewhere","since":12.5}"#]].assert_eq(
            &serde_json::to_string(&Writing::HeldElsewhere { since: 12.5 }).expect("json"),
        );
        expect_test::expect![[r#"{"event":"resize","window":{"rows":50,"cols":120}}"#]].assert_eq(
            &serde_json::to_string(&Event::Resize { window: Window { rows: 50, cols: 120 } })
                .expect("json"),
        );
    }
}
