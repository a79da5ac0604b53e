//! The daemon socket's framing (`vox_daemon::rpc`): any bytes a client may write, read as the
//! daemon reads a connection, through a `BufReader` over a reader that hands them out in
//! random chunks and sometimes is not ready (the input's first four bytes choose the line
//! bound, the buffer's capacity and the chunking; the rest is the stream).
//!
//! What must hold, against a model written here independently:
//! - `read_first_line` skips blank lines and then gives the first other line, and
//!   `read_line_bounded` every later one, exactly as splitting the stream at `\n` gives them: a
//!   line of at most the bound is its bytes (without the `\n`), a longer one is refused as
//!   `TooLong` with its length (without the `\n`), and the end is `Eof`, again and again;
//! - a line longer than the bound is never buffered beyond it: no allocation while a line is
//!   read exceeds about twice the bound;
//! - the first line's classification is total and the documented one: a JSON object naming
//!   `orch.mcp` is the MCP preamble, one naming another method that is no control method is
//!   MCP, and anything else (a control method, no method, no request) is the control protocol;
//! - the control protocol answers a line that is not JSON with a parse error, JSON that is no
//!   request object with an invalid request, and takes a request object.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::alloc::{GlobalAlloc, Layout, System};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, BufReader, ReadBuf};
use vox_daemon::rpc::{
    FirstLine, Line, classify_first_line, codes, read_first_line, read_line_bounded,
    request_error,
};

/// The system allocator, remembering the largest allocation since it was last reset.
struct Watching;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only sizes are recorded.
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract, which `System.alloc` shares.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: `ptr` and `layout` come from this allocator, hence from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Watching = Watching;

/// Bytes handed out in pseudo-random chunks of 1 to 97 bytes, sometimes after a `Pending`.
struct Chunked<'a> {
    data: &'a [u8],
    rng: u32,
}

impl Chunked<'_> {
    fn next(&mut self) -> u32 {
        // xorshift32: never 0 from a non-zero seed.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 17;
        self.rng ^= self.rng << 5;
        self.rng
    }
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = this.next();
        if r % 7 == 0 {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let n = ((r >> 8) as usize % 97 + 1)
            .min(this.data.len())
            .min(buf.remaining());
        buf.put_slice(&this.data[..n]);
        this.data = &this.data[n..];
        Poll::Ready(Ok(()))
    }
}

/// A read line, comparable.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    Data(Vec<u8>),
    TooLong(usize),
    Eof,
}

impl From<Line> for Read {
    fn from(l: Line) -> Self {
        match l {
            Line::Data(d) => Read::Data(d),
            Line::TooLong(n) => Read::TooLong(n),
            Line::Eof => Read::Eof,
        }
    }
}

/// The model: the stream split at `\n` (a last line without one counts), each line its bytes
/// when at most `max` long, else refused with its length.
fn model(mut data: &[u8], max: usize) -> Vec<Read> {
    let mut lines = Vec::new();
    while !data.is_empty() {
        let (line, rest) = match data.iter().position(|&b| b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &[][..]),
        };
        lines.push(if line.len() <= max {
            Read::Data(line.to_vec())
        } else {
            Read::TooLong(line.len())
        });
        data = rest;
    }
    lines
}

fn blank(line: &[u8]) -> bool {
    line.iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c'))
}

/// A JSON object's members in order, duplicates kept, values as written.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Members, A::Error> {
                let mut v = Vec::new();
                while let Some(e) = m.next_entry::<String, Box<RawValue>>()? {
                    v.push(e);
                }
                Ok(Members(v))
            }
        }
        d.deserialize_map(V)
    }
}

/// How deeply arrays and objects nest in (possibly malformed) JSON text.
fn depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The control methods, as the protocol documents them.
const CONTROL: [&str; 8] = [
    "orch.ping",
    "orch.boot_report",
    "orch.retire",
    "orch.shutdown",
    "orch.serve_stdio",
    "orch.cancel",
    "research.run",
    "research.persist_claims",
];

/// What a (non-blank) line is: `Err(code)` when the control protocol refuses it, else the
/// request's method when it names one as a string.
fn expected_request(line: &[u8]) -> Result<Option<String>, i64> {
    if serde_json::from_slice::<Box<RawValue>>(line).is_err() {
        return Err(codes::PARSE_ERROR);
    }
    let Ok(Members(members)) = serde_json::from_slice::<Members>(line) else {
        return Err(codes::INVALID_REQUEST);
    };
    let mut method = None;
    for field in ["id", "method", "params"] {
        let mut values = members.iter().filter(|(k, _)| k == field);
        let (first, second) = (values.next(), values.next());
        if second.is_some() {
            // A field given twice is ambiguous: refused.
            return Err(codes::INVALID_REQUEST);
        }
        if field == "method"
            && let Some((_, v)) = first
        {
            // Any value, as long as serde_json can hold it (not a number beyond f64's range).
            let Ok(v) = serde_json::from_str::<serde_json::Value>(v.get()) else {
                return Err(codes::INVALID_REQUEST);
            };
            method = v.as_str().map(str::to_owned);
        }
    }
    Ok(method)
}

fn check_line(line: &[u8], first: bool) {
    let kind = classify_first_line(Some(line));
    let refused = request_error(line);
    if depth(line) > 100 {
        // serde_json's recursion limit applies to some values and not others: only totality.
        return;
    }
    let expected = expected_request(line);
    assert_eq!(refused, expected.as_ref().err().copied(), "{:?}", String::from_utf8_lossy(line));
    if first {
        let want = match expected.ok().flatten().as_deref() {
            Some("orch.mcp") => FirstLine::McpPreamble,
            Some(m) if !CONTROL.contains(&m) => FirstLine::Mcp,
            _ => FirstLine::Control,
        };
        assert_eq!(kind, want, "{:?}", String::from_utf8_lossy(line));
    }
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
}

fuzz_target!(|input: &[u8]| {
    let [bound, capacity, s0, s1, data @ ..] = input else {
        return;
    };
    let max = match bound {
        255 => vox_daemon::MAX_MESSAGE_BYTES,
        b => *b as usize,
    };
    let capacity = *capacity as usize % 64 + 1;
    let seed = u32::from_le_bytes([*s0, *s1, 0x5a, 0xa5]);
    let mut lines = model(data, max).into_iter();
    let first_expected = lines
        .by_ref()
        .find(|l| !matches!(l, Read::Data(d) if blank(d)))
        .unwrap_or(Read::Eof);
    // Every allocation while a line is read: the line's buffer (doubling up to the bound and
    // its `\n`), and the runtime's small ones.
    let allowed = 2 * (max.min(data.len()) + 1) + 256;
    RUNTIME.with(|rt| {
        rt.block_on(async {
            let mut reader = BufReader::with_capacity(capacity, Chunked { data, rng: seed });
            LARGEST.store(0, Ordering::Relaxed);
            let first: Read = read_first_line(&mut reader, max).await.unwrap().into();
            let largest = LARGEST.load(Ordering::Relaxed);
            assert!(largest <= allowed, "{largest} bytes allocated, bound {max}");
            assert_eq!(first, first_expected);
            match &first {
                Read::Data(line) => check_line(line, true),
                _ => assert_eq!(classify_first_line(None), FirstLine::Control),
            }
            for expected in lines.chain([Read::Eof, Read::Eof]) {
                LARGEST.store(0, Ordering::Relaxed);
                let got: Read = read_line_bounded(&mut reader, max).await.unwrap().into();
                let largest = LARGEST.load(Ordering::Relaxed);
                assert!(largest <= allowed, "{largest} bytes allocated, bound {max}");
                assert_eq!(got, expected);
                if let Read::Data(line) = &got
                    && !blank(line)
                {
                    check_line(line, false);
                }
            }
        });
    });
});
