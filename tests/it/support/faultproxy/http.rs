//! HTTP/1.1 as the fault proxy reads and writes it: message heads, body framing
//! (`Content-Length`, chunked, until close) decoded through 64 KiB buffers, and the relay of
//! one body from one side to the other with a [`Plan`] of where to depart from a faithful copy.

use super::{BUF_SIZE, MAX_HEAD, MAX_LINE};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;

/// Reads response heads until a final one, relaying interim (1xx) ones to the client.
pub(super) async fn read_final_head(
    ur: &mut Reader<OwnedReadHalf>,
    cw: &mut OwnedWriteHalf,
) -> io::Result<Response> {
    loop {
        let raw = ur.read_head().await?.ok_or_else(|| eof("no response"))?;
        let resp = Response::parse(&raw).ok_or_else(|| invalid("malformed response head"))?;
        if (100..200).contains(&resp.status) && resp.status != 101 {
            cw.write_all(&raw).await?;
            continue;
        }
        return Ok(resp);
    }
}

fn eof(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, what.to_string())
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// How a message body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body (`HEAD`, 1xx/204/304, a request without length).
    Empty,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// A response delimited by the connection's close.
    UntilEof,
}

/// Headers that describe one connection, not the message: never forwarded as they are.
fn is_hop_by_hop(name: &str) -> bool {
    ["connection", "keep-alive", "proxy-connection"]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
}

/// A message head: start line and headers in order (names as sent).
pub(super) struct Head {
    start: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn parse(raw: &[u8]) -> Option<Head> {
        let text = String::from_utf8_lossy(raw);
        let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r'));
        let start = lines.next()?.to_string();
        let mut headers = Vec::new();
        for line in lines.filter(|l| !l.is_empty()) {
            let (name, value) = line.split_once(':')?;
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
        Some(Head { start, headers })
    }

    /// All values of header `name`, joined with commas.
    fn values(&self, name: &str) -> Option<String> {
        let values: Vec<&str> = self
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        (!values.is_empty()).then(|| values.join(","))
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.values(name)
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }

    /// The body framing the headers declare; `None` when contradictory or unsupported.
    fn framing(&self, without_length: Framing) -> Option<Framing> {
        if let Some(te) = self.values("transfer-encoding") {
            let last = te.rsplit(',').next().unwrap_or_default().trim();
            return match last.eq_ignore_ascii_case("chunked") {
                true => Some(Framing::Chunked),
                false if without_length == Framing::UntilEof => Some(Framing::UntilEof),
                false => None,
            };
        }
        let Some(lengths) = self.values("content-length") else {
            return Some(without_length);
        };
        let mut parsed = lengths.split(',').map(|v| v.trim().parse::<u64>().ok());
        let first = parsed.next()??;
        parsed
            .all(|v| v == Some(first))
            .then_some(Framing::Length(first))
    }

    /// The head with hop-by-hop headers replaced by `Connection: close` when `close`.
    fn serialize(&self, close: bool) -> Vec<u8> {
        let mut out = format!("{}\r\n", self.start);
        for (name, value) in self.headers.iter().filter(|(k, _)| !is_hop_by_hop(k)) {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        if close {
            out.push_str("Connection: close\r\n");
        }
        out.push_str("\r\n");
        out.into_bytes()
    }
}

/// A client's request head.
pub(super) struct Request {
    pub(super) method: String,
    pub(super) target: String,
    version: String,
    head: Head,
}

impl Request {
    pub(super) fn parse(raw: &[u8]) -> Option<Request> {
        let head = Head::parse(raw)?;
        let mut parts = head.start.split_whitespace();
        let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
        if !version.starts_with("HTTP/1.") {
            return None;
        }
        Some(Request {
            method: method.to_string(),
            target: target.to_string(),
            version: version.to_string(),
            head,
        })
    }

    pub(super) fn framing(&self) -> Option<Framing> {
        self.head.framing(Framing::Empty)
    }

    /// Whether the client wants the connection closed after this exchange.
    pub(super) fn wants_close(&self) -> bool {
        self.head.has_token("connection", "close")
            || (self.version == "HTTP/1.0" && !self.head.has_token("connection", "keep-alive"))
    }

    pub(super) fn expects_continue(&self) -> bool {
        self.head.has_token("expect", "100-continue")
    }

    /// The head sent upstream: unchanged (`Host` included) but for `Connection: close`.
    pub(super) fn upstream_head(&self) -> Vec<u8> {
        self.head.serialize(true)
    }
}

/// An upstream response head.
pub(super) struct Response {
    pub(super) status: u16,
    head: Head,
}

impl Response {
    pub(super) fn parse(raw: &[u8]) -> Option<Response> {
        let head = Head::parse(raw)?;
        let status = head.start.split_whitespace().nth(1)?.parse().ok()?;
        Some(Response { status, head })
    }

    /// How the body is delimited, given the request's method.
    pub(super) fn framing(&self, method: &str) -> Framing {
        let bodiless = method.eq_ignore_ascii_case("HEAD")
            || (100..200).contains(&self.status)
            || self.status == 204
            || self.status == 304;
        if bodiless {
            return Framing::Empty;
        }
        // Unparseable framing: relay until the upstream closes, and close after.
        self.head
            .framing(Framing::UntilEof)
            .unwrap_or(Framing::UntilEof)
    }

    /// The head for the client. The upstream's own `Connection: close` only answers ours, so
    /// it is dropped; the client is told to close only when the proxy will.
    pub(super) fn client_head(&self, close: bool) -> Vec<u8> {
        self.head.serialize(close)
    }
}

/// A buffered reader that keeps bytes read past a message for the next one (pipelining).
pub(super) struct Reader<R> {
    inner: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    pub(super) fn new(inner: R) -> Self {
        Reader {
            inner,
            buf: vec![0; BUF_SIZE].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Refills the buffer if it is empty; returns how many bytes are buffered (0 at EOF).
    async fn fill(&mut self) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = self.inner.read(&mut self.buf).await?;
        }
        Ok(self.end - self.start)
    }

    /// The first unread byte, without consuming it; `None` at EOF.
    /// The stream read from, once the relay is done with it.
    pub(super) fn into_inner(self) -> R {
        self.inner
    }

    pub(super) async fn first_byte(&mut self) -> io::Result<Option<u8>> {
        Ok((self.fill().await? > 0).then(|| self.buf[self.start]))
    }

    /// The next head up to and including its blank line; `None` at EOF before any byte.
    pub(super) async fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut head = Vec::new();
        loop {
            if self.fill().await? == 0 {
                return match head.is_empty() {
                    true => Ok(None),
                    false => Err(eof("inside a head")),
                };
            }
            while self.start < self.end {
                let byte = self.buf[self.start];
                self.start += 1;
                // Blank lines before a head are allowed (RFC 9112 §2.2).
                if head.is_empty() && (byte == b'\r' || byte == b'\n') {
                    continue;
                }
                head.push(byte);
                if head.ends_with(b"\n\r\n") || head.ends_with(b"\n\n") {
                    return Ok(Some(head));
                }
            }
            if head.len() > MAX_HEAD {
                return Err(invalid("head too large"));
            }
        }
    }

    /// One line without its line ending (chunk sizes, trailers).
    async fn read_line(&mut self) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        loop {
            if self.fill().await? == 0 {
                return Err(eof("inside a chunked body"));
            }
            while self.start < self.end {
                let byte = self.buf[self.start];
                self.start += 1;
                if byte == b'\n' {
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    return Ok(line);
                }
                line.push(byte);
            }
            if line.len() > MAX_LINE {
                return Err(invalid("line too long"));
            }
        }
    }

    /// Up to `out.len()` bytes (0 at EOF), straight from the socket when nothing is buffered.
    async fn read_into(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.start == self.end && out.len() >= self.buf.len() {
            return self.inner.read(out).await;
        }
        let n = self.fill().await?.min(out.len());
        out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        Ok(n)
    }

    /// Discards everything until EOF or an error.
    pub(super) async fn drain(&mut self) {
        while let Ok(1..) = self.fill().await {
            self.start = self.end;
        }
    }
}

/// Decodes one body into payload bytes.
pub(super) struct Decoder {
    framing: Framing,
    /// Bytes left in the body (`Length`) or in the current chunk (`Chunked`).
    left: u64,
    in_chunks: bool,
    done: bool,
    trailers: Vec<u8>,
}

impl Decoder {
    fn new(framing: Framing) -> Self {
        let (left, done) = match framing {
            Framing::Empty => (0, true),
            Framing::Length(n) => (n, n == 0),
            Framing::Chunked | Framing::UntilEof => (0, false),
        };
        Decoder {
            framing,
            left,
            in_chunks: false,
            done,
            trailers: Vec::new(),
        }
    }

    /// Reads payload bytes into `out` (never empty); 0 once the body is complete. A body cut
    /// short by EOF is an error, except for `UntilEof`.
    async fn next<R: AsyncRead + Unpin>(
        &mut self,
        r: &mut Reader<R>,
        out: &mut [u8],
    ) -> io::Result<usize> {
        if self.framing == Framing::UntilEof && !self.done {
            let n = r.read_into(out).await?;
            self.done = n == 0;
            return Ok(n);
        }
        if self.framing == Framing::Chunked && self.left == 0 && !self.done {
            self.next_chunk(r).await?;
        }
        if self.done {
            return Ok(0);
        }
        let want = self.left.min(out.len() as u64) as usize;
        let n = r.read_into(&mut out[..want]).await?;
        if n == 0 {
            return Err(eof("inside a body"));
        }
        self.left -= n as u64;
        if self.left == 0 && self.framing != Framing::Chunked {
            self.done = true;
        }
        Ok(n)
    }

    /// Reads the next chunk-size line (after the previous chunk's CRLF), or the last chunk and
    /// its trailers.
    async fn next_chunk<R: AsyncRead + Unpin>(&mut self, r: &mut Reader<R>) -> io::Result<()> {
        if self.in_chunks && !r.read_line().await?.is_empty() {
            return Err(invalid("chunk not followed by CRLF"));
        }
        self.in_chunks = true;
        let line = r.read_line().await?;
        let line = String::from_utf8_lossy(&line);
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = u64::from_str_radix(size, 16).map_err(|_| invalid("bad chunk size"))?;
        if size > 0 {
            self.left = size;
            return Ok(());
        }
        loop {
            let trailer = r.read_line().await?;
            if trailer.is_empty() {
                break;
            }
            self.trailers.extend_from_slice(&trailer);
            self.trailers.extend_from_slice(b"\r\n");
        }
        self.done = true;
        Ok(())
    }
}

/// Writes payload bytes in `framing`.
async fn write_payload<W: AsyncWrite + Unpin>(
    w: &mut W,
    framing: Framing,
    data: &[u8],
) -> io::Result<()> {
    if framing == Framing::Chunked {
        w.write_all(format!("{:x}\r\n", data.len()).as_bytes())
            .await?;
        w.write_all(data).await?;
        return w.write_all(b"\r\n").await;
    }
    w.write_all(data).await
}

/// Ends a body in `framing` (the last chunk and trailers; nothing otherwise).
async fn write_end<W: AsyncWrite + Unpin>(
    w: &mut W,
    framing: Framing,
    trailers: &[u8],
) -> io::Result<()> {
    if framing == Framing::Chunked {
        w.write_all(b"0\r\n").await?;
        w.write_all(trailers).await?;
        w.write_all(b"\r\n").await?;
    }
    w.flush().await
}

/// Where a body relay departs from a faithful copy (body offsets).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Plan {
    /// Stop after this many bytes (or at the end of a shorter body).
    pub(super) cut_at: Option<u64>,
    /// XOR the byte at this offset with 0xFF.
    pub(super) flip_at: Option<u64>,
    /// Send nothing for the duration once this many bytes are relayed.
    pub(super) stall: Option<(u64, Duration)>,
    /// Pace the body to this many bytes per second (0: as fast as it comes).
    pub(super) bytes_per_sec: u64,
}

/// Which side of a body relay failed: reading the source or writing the sink.
pub(super) enum RelayError {
    Source,
    Sink,
}

/// Counts relayed payload bytes into a proxy total and a request's record.
pub(super) struct Tally<'a> {
    pub(super) total: &'a AtomicU64,
    pub(super) record: &'a AtomicU64,
}

impl Tally<'_> {
    fn add(&self, n: u64) {
        self.total.fetch_add(n, Ordering::SeqCst);
        self.record.fetch_add(n, Ordering::SeqCst);
    }
}

/// Streams one body from `src` to `dst` in the same framing, applying `plan`.
pub(super) async fn relay_body<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    src: &mut Reader<R>,
    framing: Framing,
    dst: &mut W,
    plan: Plan,
    tally: Option<Tally<'_>>,
) -> Result<(), RelayError> {
    let mut decoder = Decoder::new(framing);
    let mut buf = vec![0u8; BUF_SIZE];
    let (mut offset, mut stall) = (0u64, plan.stall);
    // When the link has sent everything handed to it so far (pacing only).
    let mut link_free = Instant::now();
    loop {
        if let Some((_, pause)) = stall.filter(|(at, _)| *at == offset) {
            dst.flush().await.map_err(|_| RelayError::Sink)?;
            tokio::time::sleep(pause).await;
            stall = None;
        }
        let mut room = BUF_SIZE as u64;
        if let Some(cut) = plan.cut_at {
            if offset >= cut {
                return Ok(());
            }
            room = room.min(cut - offset);
        }
        if let Some((at, _)) = stall {
            room = room.min(at - offset);
        }
        let chunk = &mut buf[..room as usize];
        let n = decoder
            .next(src, chunk)
            .await
            .map_err(|_| RelayError::Source)?;
        if n == 0 {
            let end = write_end(dst, framing, &decoder.trailers).await;
            return end.map_err(|_| RelayError::Sink);
        }
        if let Some(flip) = plan
            .flip_at
            .filter(|f| (offset..offset + n as u64).contains(f))
        {
            chunk[(flip - offset) as usize] ^= 0xFF;
        }
        if let Some(tally) = &tally {
            tally.add(n as u64);
        }
        let written = write_payload(dst, framing, &chunk[..n]).await;
        written.map_err(|_| RelayError::Sink)?;
        offset += n as u64;
        if plan.bytes_per_sec > 0 {
            let on_wire = Duration::from_secs_f64(n as f64 / plan.bytes_per_sec as f64);
            link_free = link_free.max(Instant::now()) + on_wire;
            tokio::time::sleep_until(link_free).await;
        }
    }
}
