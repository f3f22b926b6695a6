//! The JSON-RPC edge of the stdio MCP connection: [`Wire`], the `rmcp`
//! transport between the server's stdin and stdout. It reads stdin itself,
//! line by line and bounded, answers a broken message with a JSON-RPC error
//! before `rmcp` sees it ([`judge`]), gives `rmcp` ids of its own
//! ([`InFlight`]), drops the notifications nothing acts on, notices that the
//! client closed stdout ([`Wire::closed`]), and tells an [`Arrivals`] of each
//! request's arrival and end. HTTP bodies are checked by the same rules
//! ([`refusal`]).
//!
//! Not for: any tool or the wording of replies (`tools`, `render`); the HTTP
//! transport (`http`).
//!
//! Invariants:
//! - Replies go to stdout one whole line at a time ([`Output::write_line`]),
//!   and nothing more is forwarded once stdout fails ([`read_messages`]).
//! - Requests cost at most about [`IN_FLIGHT_BYTES`] + 3 × [`MAX_LINE`] ≈
//!   28 MiB ([`read_bounded`], [`judge`], [`forward_bounded`]).
//! - `rmcp` gets requests in arrival order, and [`Arrivals`] hears of each
//!   before `rmcp` does ([`forward_bounded`]).
//! - No two requests in flight share a client id ([`classify`]).

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonRpcMessage, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::render::{self, WireRefusal};

/// The longest request line accepted, in bytes of JSON (its newline, and a
/// carriage return before it, not counted): 4 MiB. Commands, inputs and
/// environments larger than that belong in a file.
pub(crate) const MAX_LINE: usize = 4 * 1024 * 1024;

/// The most requests forwarded to `rmcp` and not yet answered.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// The most bytes of request lines forwarded to `rmcp` and not yet
/// answered.
pub(crate) const IN_FLIGHT_BYTES: usize = 16 * 1024 * 1024;

/// How much of an oversized line is kept to find its id: 4 KiB.
const ID_SCAN: usize = 4096;

/// The methods whose requests `rmcp` parses into typed parameters: a request
/// for one of these that does not parse has bad parameters (`-32602`).
const KNOWN_METHODS: &[&str] = &[
    "ping",
    "initialize",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/directory/read",
    "subscriptions/listen",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// Told of each request the wire forwards to `rmcp`, in the order requests
/// arrived, and of each one's end; what it makes of them is its own affair
/// (the wire knows no tool). `rmcp` gets requests in arrival order but runs
/// its handlers as tasks in whatever order they are scheduled: this is how
/// the tools still order calls by arrival (`wait_for_previous`).
pub(crate) trait Arrivals: Send + Sync {
    /// `request` arrived and goes to `rmcp` as `id`. Called from the one
    /// task that reads stdin, one request at a time in arrival order, before
    /// `rmcp` sees the request.
    fn arrived(&self, id: &RequestId, request: &ClientRequest);

    /// The request `rmcp` knows as `id` was answered, or the client
    /// cancelled it (it gets no answer then). Called at most once per
    /// request, and only for requests [`Arrivals::arrived`] was told of.
    fn ended(&self, id: &RequestId);
}

/// The server's side of the connection: an `rmcp` transport fed by a
/// checking reader task ([`read_messages`]) over an in-memory channel, and
/// writing replies to stdout.
///
/// It stands in for `rmcp`'s stdio transport, which silently drops a line
/// that is not JSON, answers a known method with bad parameters as an
/// unknown method (or with an error that has no `id`), lets a second
/// request reuse the id of one still running (which makes it cancel the
/// first one's command), and keeps reading after the client stopped
/// reading our replies.
pub(crate) struct Wire {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    output: Arc<Output>,
    reader: tokio::task::JoinHandle<()>,
}

/// The write half, shared by `rmcp`'s replies and the reader's own errors.
struct Output {
    writer: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    /// Fired once writing failed or the pipe's reader went away.
    closed: CancellationToken,
    in_flight: Mutex<InFlight>,
    /// Woken when a request leaves `in_flight`.
    released: Notify,
    /// Whether `notifications/initialized` was forwarded (once is enough).
    initialized: std::sync::atomic::AtomicBool,
    /// Told of each forwarded request and of its end.
    arrivals: Arc<dyn Arrivals>,
}

/// Requests forwarded to `rmcp` and not yet answered.
///
/// `rmcp` sees each request under an id of our own, unique for the life of
/// the connection, and replies are given the client's id back. `rmcp` keys
/// its per-request state by id and sends nothing for a cancelled request, so
/// a client id reused after a cancellation would otherwise receive the old
/// request's late reply and have its own command cancelled. Our ids grow in
/// arrival order.
#[derive(Default)]
struct InFlight {
    /// The client's id → our id and the request line's size.
    requests: HashMap<RequestId, (i64, usize)>,
    /// Our id → the client's.
    by_internal: HashMap<i64, RequestId>,
    /// Our next id.
    next: i64,
    /// The sum of the sizes in `requests`.
    bytes: usize,
}

impl InFlight {
    /// Forgets the request with the client's id `id`; returns our id for it.
    fn remove(&mut self, id: &RequestId) -> Option<i64> {
        let (internal, size) = self.requests.remove(id)?;
        self.by_internal.remove(&internal);
        self.bytes -= size;
        Some(internal)
    }
}

impl Output {
    fn in_flight(&self) -> std::sync::MutexGuard<'_, InFlight> {
        self.in_flight.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the request `rmcp` knows as `internal` (it is being
    /// answered) and wakes the reader if it waits for room. Returns the
    /// client's id, or `None` when the request was cancelled meanwhile.
    fn answered(&self, internal: &RequestId) -> Option<RequestId> {
        let RequestId::Number(internal) = internal else { return None };
        let id = {
            let mut in_flight = self.in_flight();
            let id = in_flight.by_internal.get(internal)?.clone();
            in_flight.remove(&id);
            id
        };
        self.released.notify_one();
        self.arrivals.ended(&RequestId::Number(*internal));
        Some(id)
    }

    /// Forgets a request the client cancelled; returns our id for it.
    fn cancelled(&self, id: &RequestId) -> Option<i64> {
        let internal = self.in_flight().remove(id)?;
        self.released.notify_one();
        self.arrivals.ended(&RequestId::Number(internal));
        Some(internal)
    }

    /// Writes one message as a line. A failure closes the output for good.
    async fn write_line(&self, mut line: Vec<u8>) -> io::Result<()> {
        if self.closed.is_cancelled() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        line.push(b'\n');
        let mut writer = self.writer.lock().await;
        let result = async {
            writer.write_all(&line).await?;
            writer.flush().await
        }
        .await;
        if let Err(err) = &result {
            tracing::warn!("cannot write to stdout ({err}): the client is gone; stopping");
            self.closed.cancel();
        }
        result
    }

    /// Sends a JSON-RPC error of our own. Its message can quote what the
    /// client sent (a method's name, a parameter): masked as output is.
    async fn error(&self, id: Value, code: i64, message: String) {
        let message = crate::logging::masked(&message);
        // Written by hand to keep the usual key order (`json!` sorts keys).
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{}}}}}"#,
            Value::String(message)
        );
        tracing::info!(reply = %line, "answered a broken message");
        let _ = self.write_line(line.into_bytes()).await;
    }
}

impl Wire {
    /// A wire on the process's stdin and stdout, telling `arrivals` of the
    /// requests it forwards. It watches stdout for its reader going away
    /// when stdout is a pipe.
    pub(crate) fn stdio(arrivals: Arc<dyn Arrivals>) -> Wire {
        let (read, write) = rmcp::transport::stdio_pipes();
        let wire = Wire::new(read, write, arrivals);
        watch_stdout(wire.closed());
        wire
    }

    /// A wire reading requests from `read` and writing replies to `write`,
    /// telling `arrivals` of the requests it forwards.
    pub(crate) fn new(
        read: impl AsyncRead + Send + Unpin + 'static,
        write: impl AsyncWrite + Send + Unpin + 'static,
        arrivals: Arc<dyn Arrivals>,
    ) -> Wire {
        let output = Arc::new(Output {
            writer: tokio::sync::Mutex::new(Box::new(write)),
            closed: CancellationToken::new(),
            in_flight: Mutex::default(),
            released: Notify::new(),
            initialized: std::sync::atomic::AtomicBool::new(false),
            arrivals,
        });
        // One message waits here at most: the reader itself applies the
        // in-flight bounds before sending.
        let (tx, incoming) = mpsc::channel(1);
        let reader = tokio::spawn(read_messages(BufReader::new(read), tx, Arc::clone(&output)));
        Wire { incoming, output, reader }
    }

    /// Fired when the client can no longer read replies: a write to stdout
    /// failed (`EPIPE`), or the pipe reports that its reader is gone
    /// ([`watch_stdout`]). The wire then stops forwarding requests, so that
    /// the server can stop what it runs and exit instead of running commands
    /// nobody will see the result of.
    pub(crate) fn closed(&self) -> CancellationToken {
        self.output.closed.clone()
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Transport<RoleServer> for Wire {
    type Error = io::Error;

    /// Gives a reply the client's id back ([`Output::answered`]) and writes
    /// it as one line; a reply to a request the client cancelled is dropped.
    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let output = Arc::clone(&self.output);
        async move {
            let id = match &mut item {
                JsonRpcMessage::Response(response) => Some(&mut response.id),
                JsonRpcMessage::Error(error) => error.id.as_mut(),
                _ => None,
            };
            if let Some(id) = id {
                match output.answered(id) {
                    Some(client_id) => *id = client_id,
                    // Cancelled: MCP sends no reply to a cancelled request.
                    None => return Ok(()),
                }
            }
            let line = serde_json::to_vec(&item).map_err(io::Error::other)?;
            output.write_line(line).await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.incoming.close();
        Ok(())
    }
}

/// Reads lines until end of input or until stdout closes, answering broken
/// ones and forwarding the rest. A line longer than [`MAX_LINE`] gets
/// `-32600`, with its id when [`scan_id`] finds it near the start of the
/// line.
async fn read_messages(
    mut read: BufReader<impl AsyncRead + Unpin>,
    tx: mpsc::Sender<ClientJsonRpcMessage>,
    output: Arc<Output>,
) {
    let mut line = Vec::new();
    loop {
        let read_line = tokio::select! {
            read_line = read_bounded(&mut read, &mut line) => read_line,
            () = output.closed.cancelled() => return,
        };
        match read_line {
            Ok(Line::Complete) => {
                let message = std::mem::take(&mut line);
                if let Some(forward) = check(&message, &output).await {
                    let size = message.len();
                    drop(message);
                    if !forward_bounded(forward, size, &tx, &output).await {
                        return;
                    }
                }
            }
            Ok(Line::TooLong { length }) => {
                let id = scan_id(&line);
                line.clear();
                output
                    .error(
                        id,
                        INVALID_REQUEST,
                        render::wire_refusal(&WireRefusal::TooLong { length, max: MAX_LINE }),
                    )
                    .await;
            }
            Ok(Line::Eof) => return,
            Err(err) => {
                tracing::warn!("cannot read stdin: {err}");
                return;
            }
        }
    }
}

/// A message that passed the checks.
struct Forward {
    message: ClientJsonRpcMessage,
    /// The id to track, for requests.
    request: Option<RequestId>,
}

/// Sends `forward` to `rmcp` once the in-flight bounds allow it, a request
/// under an id of our own and after [`Arrivals::arrived`]; false when `rmcp`
/// stopped listening or stdout closed. Past [`MAX_IN_FLIGHT`] requests or
/// [`IN_FLIGHT_BYTES`] bytes of request lines it waits for a reply to go
/// out, and stdin is not read meanwhile (backpressure: nothing is refused).
async fn forward_bounded(
    forward: Forward,
    size: usize,
    tx: &mpsc::Sender<ClientJsonRpcMessage>,
    output: &Output,
) -> bool {
    let mut message = forward.message;
    let mut arrived = None;
    if let Some(id) = forward.request {
        loop {
            {
                let mut in_flight = output.in_flight();
                if in_flight.requests.len() < MAX_IN_FLIGHT
                    && in_flight.bytes + size <= IN_FLIGHT_BYTES
                {
                    in_flight.next += 1;
                    let internal = in_flight.next;
                    in_flight.requests.insert(id.clone(), (internal, size));
                    in_flight.by_internal.insert(internal, id);
                    in_flight.bytes += size;
                    if let JsonRpcMessage::Request(request) = &mut message {
                        request.id = RequestId::Number(internal);
                    }
                    arrived = Some(RequestId::Number(internal));
                    break;
                }
            }
            tokio::select! {
                () = output.released.notified() => {}
                () = output.closed.cancelled() => return false,
            }
        }
    }
    if let (Some(id), JsonRpcMessage::Request(request)) = (&arrived, &message) {
        output.arrivals.arrived(id, &request.request);
    }
    if output.closed.is_cancelled() {
        return false;
    }
    tx.send(message).await.is_ok()
}

/// The outcome of one bounded line read.
enum Line {
    /// A whole line (without its newline) is in the buffer.
    Complete,
    /// The line was longer than [`MAX_LINE`]: the buffer holds its first
    /// [`ID_SCAN`] bytes, the rest was read and dropped.
    TooLong { length: usize },
    /// End of input (an unfinished last line is dropped).
    Eof,
}

/// Reads one line into `line` (cleared first), never holding more than
/// [`MAX_LINE`] bytes of it (plus a carriage return that ends it): a longer
/// line is discarded as it streams in, keeping only its first [`ID_SCAN`]
/// bytes to find its id.
async fn read_bounded(
    read: &mut BufReader<impl AsyncRead + Unpin>,
    line: &mut Vec<u8>,
) -> io::Result<Line> {
    line.clear();
    // Bytes of the line so far, its newline not counted.
    let mut length = 0usize;
    let mut too_long = false;
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::Eof);
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        let content = newline.map_or(available.len(), |at| at);
        length += content;
        // One byte more may be the `\r` of a `\r\n`, checked at the end.
        if !too_long && length > MAX_LINE + 1 {
            too_long = true;
            line.truncate(ID_SCAN);
        }
        if too_long {
            let room = ID_SCAN.saturating_sub(line.len());
            line.extend_from_slice(&available[..content.min(room)]);
        } else {
            line.extend_from_slice(&available[..content]);
        }
        read.consume(take);
        if newline.is_some() {
            if !too_long && length == MAX_LINE + 1 && line.last() != Some(&b'\r') {
                line.truncate(ID_SCAN);
                return Ok(Line::TooLong { length });
            }
            return Ok(if too_long { Line::TooLong { length } } else { Line::Complete });
        }
    }
}

/// What the check of one message decided.
enum Verdict {
    /// Nothing to do (a blank line).
    Skip,
    /// Answer with this error (the id to answer with, the code, the
    /// message) and forward nothing.
    Refuse(Value, i64, String),
    /// A request `rmcp` can serve, as its id and the parsed message
    /// (boxed: it is far larger than the other verdicts).
    Request(RequestId, Box<ClientJsonRpcMessage>),
    /// A notification or a response (the parsed value).
    Other(Value),
}

/// Checks one message's JSON and JSON-RPC shape, and that a request is
/// one `rmcp` can serve; `in_flight` tells which ids are taken. Pure: the
/// caller answers, forwards or drops. Refused, and with which code:
///
/// - a line that is not JSON: `-32700` with `id: null`; JSON nested deeper
///   than [`MAX_DEPTH`] levels (valid, but past the parser's bound on its
///   stack): `-32600` with its id when [`scan_id`] finds one;
/// - a message that is not a valid JSON-RPC 2.0 request, notification or
///   response: `-32600`, with its id when it has a usable one; a batch (a
///   JSON array) is refused the same way: MCP has no batches;
/// - a request whose id is already in flight: `-32600`, and the first
///   request is left alone;
/// - a request for a method `rmcp` knows ([`KNOWN_METHODS`]) whose
///   parameters do not fit: `-32602` with its id; for a method it does not
///   know: `-32601` with a message that lists the methods to use.
///
/// Each line is parsed twice, in time linear in its size, so it is held at
/// most three times over: raw bytes, a `Value`, the typed message.
fn judge(line: &[u8], in_flight: &InFlight) -> Verdict {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) if is_too_deep(&err) => {
            // Valid JSON, nested deeper than the parser goes (a bound on
            // its stack): the request is refused with its id, read by a
            // scan that keeps no stack, so the client is not left waiting.
            let message = render::wire_refusal(&WireRefusal::TooDeep { max: MAX_DEPTH });
            return Verdict::Refuse(scan_id(line), INVALID_REQUEST, message);
        }
        Err(err) => {
            // `rmcp` itself stopped answering lines that are not JSON
            // (modelcontextprotocol/rust-sdk issue #938, PR #940): a peer
            // that answers the error with more non-JSON (a log line on the
            // wrong stream) can make two programs bounce errors for ever.
            // We still answer, once per line: JSON-RPC asks for it, and an
            // agent that sent a broken request learns why nothing ran
            // instead of waiting. The storm needs a client that writes a
            // non-JSON line in reply to a response; MCP clients write only
            // requests, notifications and responses to requests we sent, and
            // the reply has `id: null`, which no request of ours carries.
            let message = render::wire_refusal(&WireRefusal::NotJson(&err.to_string()));
            return Verdict::Refuse(Value::Null, PARSE_ERROR, message);
        }
    };
    match classify(&value, in_flight) {
        Ok(Shape::Request { id, method }) => {
            match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
                Ok(JsonRpcMessage::Request(request))
                    if matches!(request.request, ClientRequest::CustomRequest(_))
                        && KNOWN_METHODS.contains(&method.as_str()) =>
                {
                    Verdict::Refuse(
                        value["id"].clone(),
                        INVALID_PARAMS,
                        bad_params(&method, &value),
                    )
                }
                // Every method `rmcp` can serve parses into a typed request;
                // the rest would get a bare "method not found" from it.
                Ok(JsonRpcMessage::Request(request))
                    if matches!(request.request, ClientRequest::CustomRequest(_)) =>
                {
                    let message = render::unknown_method(&method);
                    Verdict::Refuse(value["id"].clone(), METHOD_NOT_FOUND, message)
                }
                Ok(message) => Verdict::Request(id, Box::new(message)),
                Err(err) => {
                    let (code, message) = if KNOWN_METHODS.contains(&method.as_str()) {
                        (INVALID_PARAMS, bad_params(&method, &value))
                    } else {
                        let err = err.to_string();
                        (INVALID_REQUEST, render::wire_refusal(&WireRefusal::Invalid(&err)))
                    };
                    Verdict::Refuse(value["id"].clone(), code, message)
                }
            }
        }
        Ok(Shape::Other) => Verdict::Other(value),
        Err((id, message)) => Verdict::Refuse(
            id,
            INVALID_REQUEST,
            render::wire_refusal(&WireRefusal::Invalid(&message)),
        ),
    }
}

/// The error a message sent in one HTTP request body gets, as on stdio
/// (its id, the JSON-RPC code and the message), or `None` when it may go
/// on to `rmcp`. Each HTTP request is its own exchange: no id is taken.
pub(crate) fn refusal(body: &[u8]) -> Option<(Value, i64, String)> {
    match judge(body, &InFlight::default()) {
        Verdict::Refuse(id, code, message) => Some((id, code, message)),
        Verdict::Skip => {
            Some((Value::Null, INVALID_REQUEST, render::wire_refusal(&WireRefusal::EmptyBody)))
        }
        Verdict::Request(..) | Verdict::Other(_) => None,
    }
}

/// Checks one line: answers it if it is broken, else returns what to
/// forward. Empty lines are ignored.
async fn check(line: &[u8], output: &Output) -> Option<Forward> {
    // The lock on the ids in flight is released before anything is awaited.
    let verdict = judge(line, &output.in_flight());
    let value = match verdict {
        Verdict::Skip => return None,
        Verdict::Refuse(id, code, message) => {
            output.error(id, code, message).await;
            return None;
        }
        Verdict::Request(id, message) => {
            return Some(Forward { message: *message, request: Some(id) });
        }
        Verdict::Other(value) => value,
    };
    if !forwards_notification(&value, output) {
        tracing::debug!(method = %value["method"], "dropped a notification the server has no use for");
        return None;
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(mut message) => {
            if let JsonRpcMessage::Notification(notification) = &mut message
                && let ClientNotification::CancelledNotification(cancel) =
                    &mut notification.notification
            {
                // Tell `rmcp` our id for the request; a cancellation of
                // a request that is not running has nothing to stop.
                let internal =
                    cancel.params.request_id.as_ref().and_then(|id| output.cancelled(id))?;
                cancel.params.request_id = Some(RequestId::Number(internal));
            }
            Some(Forward { message, request: None })
        }
        Err(err) => {
            // A notification or a response gets no reply (JSON-RPC),
            // which also avoids error storms between two peers.
            tracing::warn!("ignored a notification or response that does not parse: {err}");
            None
        }
    }
}

/// How deep arrays and objects may nest in a message: `serde_json`'s
/// recursion limit, which keeps the parser's stack bounded.
const MAX_DEPTH: usize = 128;

/// Whether `err` is `serde_json`'s refusal of nesting past [`MAX_DEPTH`]
/// (JSON that is valid but too deep), which gets an answer with the
/// request's id rather than a parse error with none.
fn is_too_deep(err: &serde_json::Error) -> bool {
    err.is_syntax() && err.to_string().starts_with("recursion limit exceeded")
}

/// Whether a notification (or response) goes on to `rmcp`: responses do,
/// and of notifications only those the server acts on: a cancellation and
/// the first `notifications/initialized`. `rmcp` logs every notification it
/// gets and spawns a task for it, so a flood of notifications it would
/// ignore anyway (100,000 unknown ones) held up the requests behind them
/// for seconds; dropped here, each costs one JSON parse.
fn forwards_notification(value: &Value, output: &Output) -> bool {
    match value.get("method").and_then(Value::as_str) {
        None => true,
        Some("notifications/cancelled") => true,
        Some("notifications/initialized") => {
            !output.initialized.swap(true, std::sync::atomic::Ordering::Relaxed)
        }
        Some(_) => false,
    }
}

/// What kind of valid JSON-RPC message a value is.
enum Shape {
    /// A request: it needs a reply.
    Request { id: RequestId, method: String },
    /// A notification or a response.
    Other,
}

/// Checks the JSON-RPC 2.0 shape of `value`. The error carries the id to
/// answer with (`null` when there is no usable one) and what is wrong.
fn classify(value: &Value, in_flight: &InFlight) -> Result<Shape, (Value, String)> {
    let Value::Object(object) = value else {
        return Err((
            Value::Null,
            if value.is_array() {
                "batches (JSON arrays) are not supported by MCP; send one message per line"
                    .to_owned()
            } else {
                "a JSON-RPC message must be a JSON object".to_owned()
            },
        ));
    };
    let id = match object.get("id") {
        None => None,
        Some(id @ Value::String(_)) => Some(id),
        Some(id @ Value::Number(number)) if number.is_i64() => Some(id),
        Some(Value::Number(number)) => {
            return Err((
                Value::Number(number.clone()),
                "`id` must be a string or an integer".to_owned(),
            ));
        }
        Some(_) => return Err((Value::Null, "`id` must be a string or an integer".to_owned())),
    };
    let reply_id = id.cloned().unwrap_or(Value::Null);
    if object.get("jsonrpc") != Some(&Value::String("2.0".to_owned())) {
        return Err((reply_id, "`jsonrpc` must be \"2.0\"".to_owned()));
    }
    match object.get("method") {
        Some(Value::String(method)) => {
            if let Some(params) = object.get("params")
                && !params.is_object()
                && !params.is_array()
                && id.is_some()
            {
                return Err((reply_id, "`params` must be an object".to_owned()));
            }
            if object.contains_key("result") || object.contains_key("error") {
                return Err((reply_id, "a request has no `result` or `error`".to_owned()));
            }
            let Some(id) = id else { return Ok(Shape::Other) };
            let id =
                RequestId::deserialize(id).map_err(|err| (reply_id.clone(), err.to_string()))?;
            if in_flight.requests.contains_key(&id) {
                return Err((
                    reply_id,
                    format!(
                        "id {} is already used by a request that is still running; give each \
                         request its own id (the running request is not affected)",
                        object["id"]
                    ),
                ));
            }
            Ok(Shape::Request { id, method: method.clone() })
        }
        Some(_) => Err((reply_id, "`method` must be a string".to_owned())),
        None if object.contains_key("result") != object.contains_key("error")
            && object.contains_key("id") =>
        {
            Ok(Shape::Other)
        }
        None => Err((
            reply_id,
            "a message needs a `method` (request or notification), or an `id` with `result` or \
             `error` (response)"
                .to_owned(),
        )),
    }
}

/// The `-32602` message for a known method whose parameters do not parse,
/// naming what is wrong where the method's parameter type says.
fn bad_params(method: &str, value: &Value) -> String {
    use rmcp::model::{CallToolRequestParams, InitializeRequestParams};
    let params = value.get("params").cloned().unwrap_or(Value::Null);
    let detail = match method {
        "tools/call" => serde_json::from_value::<CallToolRequestParams>(params).err(),
        "initialize" => serde_json::from_value::<InitializeRequestParams>(params).err(),
        _ => None,
    };
    match detail {
        // The error can quote a parameter: masked as output is.
        Some(err) => {
            let detail = err.to_string();
            crate::logging::masked(&render::wire_refusal(&WireRefusal::BadParams {
                method,
                detail: Some(&detail),
            }))
        }
        None => render::wire_refusal(&WireRefusal::BadParams { method, detail: None }),
    }
}

/// Finds the top-level `"id"` of a message from its first bytes, for the
/// reply to an oversized line; `null` when it is not there or not plain.
fn scan_id(prefix: &[u8]) -> Value {
    // Walk the prefix as JSON tokens, tracking depth, until the key `id` at
    // depth 1; then parse the value that follows.
    let mut depth = 0usize;
    let mut at = 0usize;
    let mut expect_key = false;
    while at < prefix.len() {
        match prefix[at] {
            b'{' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => expect_key = depth == 1,
            b'"' => {
                let start = at;
                at += 1;
                while at < prefix.len() && prefix[at] != b'"' {
                    at += if prefix[at] == b'\\' { 2 } else { 1 };
                }
                let key = prefix.get(start..=at).unwrap_or_default();
                if expect_key && key == b"\"id\"" {
                    let rest = &prefix[(at + 1).min(prefix.len())..];
                    let rest = rest.trim_ascii_start().strip_prefix(b":").unwrap_or_default();
                    let mut values =
                        serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
                    return match values.next() {
                        // A number that reaches the end of the prefix may
                        // have been cut.
                        Some(Ok(id @ (Value::String(_) | Value::Number(_))))
                            if values.byte_offset() < rest.len() =>
                        {
                            id
                        }
                        _ => Value::Null,
                    };
                }
                expect_key = false;
            }
            _ => {}
        }
        at += 1;
    }
    Value::Null
}

/// Fires `closed` when stdout is a pipe or a socket whose reader has gone
/// away, even while nothing is being written (a command may run for hours).
/// A thread blocks in `poll(2)` on stdout with no events requested: the
/// kernel reports `POLLERR` on a pipe's write end once no reader is left,
/// and `POLLHUP` on a socket once its peer closed it (Node.js clients pass
/// socket pairs as stdio). Other kinds of stdout (a file, a terminal) are
/// not watched; a failed write still closes the wire.
fn watch_stdout(closed: CancellationToken) {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    let stdout = io::stdout();
    let watchable = stdout
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|file| file.metadata())
        .is_ok_and(|metadata| {
            let kind = metadata.file_type();
            kind.is_fifo() || kind.is_socket()
        });
    if !watchable {
        return;
    }
    let spawned = std::thread::Builder::new().name("stdout-watch".to_owned()).spawn(move || {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let stdout = io::stdout();
        loop {
            let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {
                    let revents = fds[0].revents().unwrap_or(PollFlags::empty());
                    if revents
                        .intersects(PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL)
                    {
                        tracing::warn!("stdout was closed by the client; stopping");
                        closed.cancel();
                        return;
                    }
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(err) => {
                    tracing::debug!("cannot watch stdout: {err}");
                    return;
                }
            }
        }
    });
    if let Err(err) = spawned {
        tracing::debug!("cannot watch stdout: {err}");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use serde_json::json;

    /// A parameter quoted by the `-32602` message is masked with the
    /// server's secrets.
    #[test]
    fn bad_params_masks_what_it_quotes() {
        let value = "wire-secret-value-0123";
        let secrets = shellkeep_engine::Secrets::new([("W".to_owned(), value.to_owned())], true);
        let _ = crate::logging::LOG_MASKS.set(std::sync::Arc::new(secrets));
        let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        for quoted in [value, token] {
            let request =
                json!({"method": "tools/call", "params": {"name": "x", "arguments": quoted}});
            let message = bad_params("tools/call", &request);
            assert!(message.contains("Invalid params for tools/call"), "{message}");
            assert!(message.contains("<secret-hidden>") && !message.contains(quoted), "{message}");
        }
    }

    /// Issue 19: JSON nested past the parser's bound is told apart from
    /// JSON that is broken, and its id is found wherever it is.
    #[test]
    fn too_deep_json_is_told_apart_and_its_id_found() {
        let deep = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let parse = |line: &str| serde_json::from_slice::<Value>(line.as_bytes());
        assert!(parse(&deep(MAX_DEPTH - 1)).is_ok());
        assert!(parse(&deep(MAX_DEPTH + 1)).is_err_and(|err| is_too_deep(&err)));
        assert!(parse("{\"id\":").is_err_and(|err| !is_too_deep(&err)));
        assert!(parse(&"[".repeat(10)).is_err_and(|err| !is_too_deep(&err)));
        let nested = deep(1000);
        let after = format!("{{\"jsonrpc\":\"2.0\",\"params\":{nested},\"id\":5}}");
        assert!(parse(&after).is_err_and(|err| is_too_deep(&err)));
        assert_eq!(scan_id(after.as_bytes()), json!(5));
        let before = format!("{{\"id\":\"x\",\"params\":{{\"a\":{nested}}}}}");
        assert_eq!(scan_id(before.as_bytes()), json!("x"));
    }

    #[test]
    fn scan_id_finds_the_top_level_id_only() {
        let cases: &[(&str, Value)] = &[
            (r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#, json!(7)),
            (r#"{"id" : "a\"b","method""#, json!("a\"b")),
            (r#"{"method":"x","params":{"id":3},"id":4,"#, json!(4)),
            (r#"{"method":"x","params":{"id":3,"command":"aaaa"#, Value::Null),
            (r#"{"method":"x","params":{"command":"\"id\":5"#, Value::Null),
            (r#"{"a":["id",{"id":1}],"id":2}"#, json!(2)),
            (r#"{"id":{"x":1}}"#, Value::Null),
            (r#"{"id":12"#, Value::Null),
            ("", Value::Null),
        ];
        for (prefix, id) in cases {
            assert_eq!(&scan_id(prefix.as_bytes()), id, "{prefix}");
        }
    }

    #[test]
    fn classify_answers_with_the_id_when_it_is_usable() {
        let in_flight = InFlight::default();
        let error = |value: Value| match classify(&value, &in_flight) {
            Err((id, _)) => id,
            Ok(_) => panic!("{value} is not valid"),
        };
        assert_eq!(error(json!([])), Value::Null);
        assert_eq!(error(json!(3)), Value::Null);
        assert_eq!(error(json!({"jsonrpc": "1.0", "id": 5, "method": "ping"})), json!(5));
        assert_eq!(error(json!({"jsonrpc": "2.0", "id": "x", "method": 1})), json!("x"));
        assert_eq!(error(json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"})), json!(1.5));
        assert_eq!(error(json!({"jsonrpc": "2.0", "id": [1], "method": "ping"})), Value::Null);
        assert_eq!(error(json!({"jsonrpc": "2.0", "id": null, "method": "ping"})), Value::Null);
        assert_eq!(
            error(json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": 3})),
            json!(2)
        );
        assert_eq!(error(json!({"jsonrpc": "2.0", "id": 2})), json!(2));
        assert!(
            classify(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), &in_flight)
                .is_ok()
        );
        assert!(classify(&json!({"jsonrpc": "2.0", "id": 1, "result": {}}), &in_flight).is_ok());
    }

    /// The `method` of every typed variant of one of `rmcp`'s untagged
    /// message unions, read from its JSON schema: each variant is a
    /// `Request`/`Notification` whose `method` is a constant string; the
    /// catch-all (`CustomRequest`, `CustomNotification`) has a free string
    /// and yields none.
    fn typed_methods(schema: &Value) -> BTreeSet<String> {
        let resolve = |node: &Value| -> Value {
            let mut node = node.clone();
            while let Some(reference) = node.get("$ref").and_then(Value::as_str).map(str::to_owned)
            {
                let name = reference.rsplit('/').next().expect("a reference names a definition");
                node = schema["$defs"][name].clone();
                assert!(!node.is_null(), "unresolved reference {reference}");
            }
            node
        };
        let variants = schema["anyOf"].as_array().or_else(|| schema["oneOf"].as_array());
        let variants = variants.expect("an untagged union's schema lists its variants");
        let mut methods = BTreeSet::new();
        for variant in variants {
            let method = resolve(&resolve(variant)["properties"]["method"]);
            if let Some(name) = method.get("const").and_then(Value::as_str) {
                methods.insert(name.to_owned());
            }
        }
        methods
    }

    fn schema_of<T: rmcp::schemars::JsonSchema>() -> Value {
        serde_json::to_value(rmcp::schemars::schema_for!(T)).expect("a schema is JSON")
    }

    /// `KNOWN_METHODS` decides between `-32602` (a method `rmcp` parses,
    /// with bad parameters) and `-32601` (a method it does not know). It
    /// must be exactly the requests `rmcp` parses into typed ones, so that
    /// an `rmcp` upgrade that adds or drops one fails here instead of
    /// silently changing which error a client gets.
    #[test]
    fn known_methods_are_exactly_rmcps_typed_client_requests() {
        let rmcp_methods = typed_methods(&schema_of::<ClientRequest>());
        let ours: BTreeSet<String> = KNOWN_METHODS.iter().map(|m| (*m).to_owned()).collect();
        assert_eq!(ours.len(), KNOWN_METHODS.len(), "KNOWN_METHODS repeats a method");
        assert_eq!(
            ours, rmcp_methods,
            "KNOWN_METHODS (left) differs from the requests rmcp parses into typed ones (right): \
             make KNOWN_METHODS the right-hand list"
        );
        // The schema is read right: methods whose parameters may be left
        // out parse into typed requests, an unknown one into the catch-all
        // (as does a typed method whose parameters do not fit, which is why
        // the wire needs this list at all).
        for (method, typed) in [("ping", true), ("tools/list", true), ("no/such/method", false)] {
            let line = json!({"jsonrpc": "2.0", "id": 1, "method": method});
            let Ok(JsonRpcMessage::Request(request)) =
                serde_json::from_value::<ClientJsonRpcMessage>(line)
            else {
                panic!("{method}: not parsed as a request");
            };
            let custom = matches!(request.request, ClientRequest::CustomRequest(_));
            assert_eq!(!custom, typed, "{method}");
            assert_eq!(rmcp_methods.contains(method), typed, "{method}");
        }
    }

    /// The notifications the wire forwards must be ones `rmcp` parses into
    /// typed ones (else `rmcp` would ignore them), and the typed ones are
    /// pinned: a new one in an `rmcp` upgrade fails here until someone
    /// decides whether `forwards_notification` lets it through.
    #[test]
    fn forwarded_notifications_are_rmcps_typed_ones() {
        let rmcp_methods = typed_methods(&schema_of::<ClientNotification>());
        let pinned: BTreeSet<String> = [
            "notifications/cancelled",
            "notifications/initialized",
            "notifications/progress",
            "notifications/roots/list_changed",
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(
            pinned, rmcp_methods,
            "rmcp's typed client notifications (right) changed: decide whether the wire forwards \
             each new one (forwards_notification), then pin the new list (left)"
        );
        for forwarded in ["notifications/cancelled", "notifications/initialized"] {
            assert!(rmcp_methods.contains(forwarded), "{forwarded} is not typed in rmcp");
        }
    }
}
