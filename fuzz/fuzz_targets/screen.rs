//! The terminal renderer on arbitrary bytes, fed in arbitrary pieces and
//! handled as the session handles them: no panic, the memory it holds
//! never exceeds the bound set by the window's size, and nothing the
//! stream leaves behind (an escape sequence it never ended, a half
//! character, erased lines, a full-screen view) hides a line printed after
//! it.
//!
//! Input layout: rows, columns, a seed for the piece sizes, how many times
//! to feed the stream (so a short input can make lines longer than the
//! renderer keeps), then the stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use shellkeep_engine::{Marker, Screen, ScreenStop as Stop};

fuzz_target!(|data: &[u8]| {
    let [rows, cols, seed, repeat, stream @ ..] = data else { return };
    if stream.is_empty() {
        return;
    }
    let mut screen = Screen::new(u16::from(*rows % 64), u16::from(*cols), "n0nce");
    let mut seed = u32::from(*seed) | 1;
    for _ in 0..=(*repeat % 16) {
        let mut rest = stream;
        while !rest.is_empty() {
            // A small xorshift: piece sizes from 1 byte to the whole rest.
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let size = 1 + seed as usize % rest.len();
            let (mut piece, tail) = rest.split_at(size);
            rest = tail;
            while !piece.is_empty() {
                let (consumed, stop) = screen.feed(piece);
                assert!(consumed <= piece.len());
                piece = &piece[consumed..];
                match stop {
                    Some(Stop::Marker(Marker::Start { .. })) => screen.discard_window(),
                    Some(Stop::Marker(Marker::End { .. })) => {
                        screen.commit_all();
                        screen.leave_alternate();
                    }
                    // The shell's prompt while a command had not ended: what
                    // came before it is the command's output.
                    Some(Stop::Marker(Marker::Prompt { .. })) => screen.commit_all(),
                    // Line editing back for a person: the echo of the line
                    // that asked it goes.
                    Some(Stop::Marker(Marker::Editing)) => {
                        screen.commit_all();
                        screen.discard_window();
                    }
                    Some(Stop::AlternateScreen(_)) | None => {}
                }
                assert!(
                    screen.window_cost() <= screen.window_bound(),
                    "the window holds {} bytes, more than its bound {}",
                    screen.window_cost(),
                    screen.window_bound()
                );
                drop(screen.take_committed());
            }
            // What a reply in the middle of a command reads.
            if seed.is_multiple_of(4) {
                screen.commit_complete_lines();
                let _ = screen.current_line();
                let _ = screen.alternate_contents();
                drop(screen.take_responses());
            }
        }
    }
    // A line printed after whatever the stream left is seen: in the
    // committed text, or on the full-screen view still showing.
    drop(screen.take_committed());
    let probe = b"\r\nZ9\r\n";
    let (consumed, stop) = screen.feed(probe);
    assert_eq!((consumed, stop), (probe.len(), None));
    assert!(screen.window_cost() <= screen.window_bound());
    let mut seen = screen.take_committed();
    seen.push_str(&screen.alternate_contents().unwrap_or_default());
    screen.commit_all();
    screen.leave_alternate();
    seen.push_str(&screen.take_committed());
    assert!(seen.contains("Z9"), "the probe line is hidden: {seen:?}");
});
