//! Blob bodies as streams: files and responses read in bounded pieces, and the verified reader
//! that hashes and counts every byte of an upload and fails at the end when the digest or size
//! is not what was promised. Memory stays bounded by the piece size whatever the blob size.

use super::digest::{Digest, StreamHasher};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use std::io;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed stream of blob chunks.
pub type ByteStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

/// Size of one read from disk.
pub const CHUNK: usize = 256 * 1024;

/// Called with the length of each chunk as it passes (progress bars, counters).
pub type OnBytes = Arc<dyn Fn(u64) + Send + Sync>;

/// A blob's source, hashed and counted as it passes and cut into request bodies: each
/// [`VerifiedReader::take`] yields the next `len` bytes as a stream and hands the reader back
/// once they have all passed, so one source stream feeds every chunk of an upload. The stream
/// fails at the blob's last byte when the digest does not match, or when the source has more
/// bytes than the blob's size, so a consumer never commits bad content. It may start part
/// way, from a hash state saved earlier (a resumed upload).
pub struct VerifiedReader {
    stream: ByteStream,
    leftover: Bytes,
    hasher: StreamHasher,
    digest: Digest,
    size: u64,
    what: String,
    on_bytes: OnBytes,
}

impl VerifiedReader {
    /// A reader over `stream`, which yields the blob from `hasher.len()` on; `what` names the
    /// blob in errors; `on_bytes` sees every chunk.
    pub fn new(
        stream: ByteStream,
        hasher: StreamHasher,
        digest: Digest,
        size: u64,
        what: String,
        on_bytes: OnBytes,
    ) -> Self {
        VerifiedReader {
            stream,
            leftover: Bytes::new(),
            hasher,
            digest,
            size,
            what,
            on_bytes,
        }
    }

    /// Bytes of the blob passed so far (resumed ones included).
    pub fn offset(&self) -> u64 {
        self.hasher.len()
    }

    /// The hash over everything passed so far.
    pub fn hasher(&self) -> &StreamHasher {
        &self.hasher
    }

    /// The blob's digest.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// The blob's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The next `len` bytes as a stream, and the reader back once they have passed.
    pub fn take(self, len: u64) -> (ByteStream, tokio::sync::oneshot::Receiver<VerifiedReader>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let state = (Some(self), len, Some(tx));
        let stream = futures_util::stream::unfold(state, |(reader, remaining, tx)| async move {
            let mut r = reader?;
            if remaining == 0 {
                if let Some(tx) = tx {
                    let _ = tx.send(r);
                }
                return None;
            }
            let piece = match r.next_piece(remaining).await {
                Ok(p) => p,
                Err(e) => return Some((Err(e), (None, 0, None))),
            };
            let remaining = remaining - piece.len() as u64;
            if remaining == 0 {
                // Hand the reader back now: an HTTP client stops polling a body once it has
                // sent Content-Length bytes.
                if let Some(tx) = tx {
                    let _ = tx.send(r);
                }
                return Some((Ok(piece), (None, 0, None)));
            }
            Some((Ok(piece), (Some(r), remaining, tx)))
        });
        (Box::pin(stream), rx)
    }

    /// At most `max` next bytes, hashed and counted; checked at the blob's end.
    async fn next_piece(&mut self, max: u64) -> io::Result<Bytes> {
        let mut piece = if self.leftover.is_empty() {
            match self.stream.next().await {
                Some(r) => r?,
                None => return Err(self.ended_early()),
            }
        } else {
            std::mem::take(&mut self.leftover)
        };
        if piece.len() as u64 > max {
            self.leftover = piece.split_off(max as usize);
        }
        self.hasher.update(&piece);
        (self.on_bytes)(piece.len() as u64);
        if self.offset() == self.size {
            self.check_end().await?;
        }
        Ok(piece)
    }

    /// At the blob's last byte: nothing more from the source, and the digest matches.
    async fn check_end(&mut self) -> io::Result<()> {
        let more = !self.leftover.is_empty()
            || matches!(self.stream.next().await, Some(Ok(b)) if !b.is_empty());
        if more {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: more bytes than its size of {}", self.what, self.size),
            ));
        }
        self.hasher
            .clone()
            .verify(&self.what, &self.digest, self.size)
            .map_err(|m| io::Error::new(io::ErrorKind::InvalidData, m))
    }

    fn ended_early(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "{}: the source ended at byte {} of {}",
                self.what,
                self.offset(),
                self.size
            ),
        )
    }
}

/// Reads a blob file as a stream of chunks, from `offset`, ending one byte past `size` at most
/// (so a [`VerifiedReader`] sees an overlong file without reading all of it). Only a regular
/// file is opened (see [`crate::bounded`]): a FIFO or a symlink to a device is refused.
pub async fn file_stream(path: &std::path::Path, offset: u64, size: u64) -> io::Result<ByteStream> {
    regular_file_stream(path, offset, (size + 1).saturating_sub(offset)).await
}

/// Reads `len` bytes from `start` of a regular file (a blob inside an archive chunk) as a
/// stream of chunks.
pub async fn range_stream(path: &std::path::Path, start: u64, len: u64) -> io::Result<ByteStream> {
    regular_file_stream(path, start, len).await
}

/// At most `limit` bytes of a regular file from `start`, as a stream of chunks.
async fn regular_file_stream(
    path: &std::path::Path,
    start: u64,
    limit: u64,
) -> io::Result<ByteStream> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let owned = path.to_path_buf();
    let (file, _) = tokio::task::spawn_blocking(move || crate::bounded::open_regular(&owned))
        .await
        .map_err(io::Error::other)??;
    let mut file = fs_err::tokio::File::from_std(file);
    if start > 0 {
        file.seek(io::SeekFrom::Start(start)).await?;
    }
    let file = file.take(limit);
    Ok(Box::pin(futures_util::stream::unfold(
        file,
        |mut f| async move {
            let mut buf = vec![0u8; CHUNK];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(Bytes::from(buf)), f))
                }
                Err(e) => Some((Err(e), f)),
            }
        },
    )))
}

/// The most of an error body (or a body read only to be thrown away) that is ever read: enough
/// for any spec error document, and a 2 GB body costs nothing.
pub const ERROR_BODY_MAX: usize = 64 * 1024;

/// The most a token service's answer may be.
pub const TOKEN_BODY_MAX: usize = 1024 * 1024;

/// The most an image config read whole into memory may be.
pub const CONFIG_BODY_MAX: usize = 16 * 1024 * 1024;

/// Why [`read_body`] stopped.
#[derive(Debug)]
pub enum BodyError {
    /// The body went past the limit (whatever its Content-Length said); the message names the
    /// URL and the limit.
    TooLarge(String),
    /// The transport failed mid-body.
    Transport(reqwest::Error),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge(m) => f.write_str(m),
            BodyError::Transport(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BodyError {}

/// Reads a response body whole, chunk by chunk, failing as soon as it passes `limit` bytes:
/// a chunked body that never ends, or a Content-Length of gigabytes, costs at most `limit`.
pub async fn read_body(resp: reqwest::Response, limit: usize) -> Result<Bytes, BodyError> {
    let url = crate::secret::redact_url(resp.url().as_str());
    let too_large = || {
        BodyError::TooLarge(format!(
            "{url} sent a body larger than {limit} bytes, more than such an answer may be"
        ))
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut out = bytes::BytesMut::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(BodyError::Transport)?;
        if out.len() + chunk.len() > limit {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out.freeze())
}

/// The first `limit` bytes of a body (an error document), and whether it was cut there; the
/// rest is never read. A transport failure mid-body keeps what came.
pub async fn read_body_prefix(resp: reqwest::Response, limit: usize) -> (Bytes, bool) {
    let mut out = bytes::BytesMut::new();
    let mut body = resp.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        let room = limit - out.len();
        if chunk.len() > room {
            out.extend_from_slice(&chunk[..room]);
            return (out.freeze(), true);
        }
        out.extend_from_slice(&chunk);
    }
    (out.freeze(), false)
}

/// Reads and throws away a body we do not need, up to [`ERROR_BODY_MAX`] (so the connection can
/// be reused when the body is short, and a hostile endless one is simply dropped).
pub async fn discard_body(resp: reqwest::Response) {
    let _ = read_body_prefix(resp, ERROR_BODY_MAX).await;
}

/// A response body as a [`ByteStream`].
pub fn response_stream(resp: reqwest::Response) -> ByteStream {
    Box::pin(resp.bytes_stream().map(|r| r.map_err(io::Error::other)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static [u8]]) -> ByteStream {
        let items: Vec<io::Result<Bytes>> =
            parts.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        Box::pin(futures_util::stream::iter(items))
    }

    fn reader(parts: &[&'static [u8]], whole: &[u8], on_bytes: OnBytes) -> VerifiedReader {
        VerifiedReader::new(
            chunks(parts),
            StreamHasher::new(),
            Digest::of(whole),
            whole.len() as u64,
            "blob x".into(),
            on_bytes,
        )
    }

    #[tokio::test]
    async fn good_stream_passes_in_chunks_and_counts() {
        let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let s2 = seen.clone();
        let r = reader(
            &[b"ab", b"cde"],
            b"abcde",
            Arc::new(move |n| {
                s2.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }),
        );
        let (first, back) = r.take(3);
        let out: Vec<_> = first.collect().await;
        assert_eq!(
            out.iter().map(|b| b.as_ref().unwrap().len()).sum::<usize>(),
            3
        );
        let r = back.await.expect("reader handed back");
        assert_eq!(r.offset(), 3);
        let (rest, _) = r.take(2);
        let out: Vec<_> = rest.collect().await;
        assert!(out.iter().all(|b| b.is_ok()));
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 5);
    }

    #[tokio::test]
    async fn flipped_byte_fails_at_the_end() {
        let (s, _) = reader(&[b"ab", b"d"], b"abc", Arc::new(|_| {})).take(3);
        let out: Vec<_> = s.collect().await;
        let err = out.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("blob x"));
    }

    #[tokio::test]
    async fn overlong_stream_fails() {
        let (s, _) = reader(&[b"abcd", b"e"], b"abc", Arc::new(|_| {})).take(3);
        let out: Vec<_> = s.collect().await;
        assert_eq!(out.len(), 1);
        assert!(out[0].is_err());
    }

    #[tokio::test]
    async fn short_stream_fails_naming_the_offset() {
        let (s, _) = reader(&[b"ab"], b"abc", Arc::new(|_| {})).take(3);
        let out: Vec<_> = s.collect().await;
        let err = out.last().unwrap().as_ref().unwrap_err();
        assert!(err.to_string().contains("byte 2 of 3"), "{err}");
    }

    /// A server on 127.0.0.1 that answers any request with a chunked body of `byte`s that
    /// never ends (generated as it is sent); its URL.
    async fn endless_chunked_server(byte: u8) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut req = [0u8; 4096];
                    let _ = sock.read(&mut req).await;
                    let head =
                        "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n";
                    if sock.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let mut chunk = b"10000\r\n".to_vec();
                    chunk.extend(std::iter::repeat_n(byte, 0x10000));
                    chunk.extend_from_slice(b"\r\n");
                    while sock.write_all(&chunk).await.is_ok() {}
                });
            }
        });
        format!("http://{addr}/v2/a/manifests/latest")
    }

    /// Regression: a chunked body that never ends was read whole (a 3 GB manifest took 3 GB
    /// of memory); the bounded read stops past its limit, naming the URL and the limit.
    #[tokio::test]
    async fn an_endless_chunked_body_stops_at_its_limit() {
        let url = endless_chunked_server(b'x').await;
        let resp = reqwest::get(&url).await.unwrap();
        let err = read_body(resp, 4 * 1024 * 1024).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, BodyError::TooLarge(_)), "{text}");
        assert!(
            text.contains(&url) && text.contains("4194304 bytes"),
            "{text}"
        );
    }

    /// Regression: an error body was read whole (a 2 GB one took 2 GB); only its first
    /// [`ERROR_BODY_MAX`] bytes are read, and the cut is reported.
    #[tokio::test]
    async fn an_endless_error_body_is_cut() {
        let url = endless_chunked_server(b'e').await;
        let resp = reqwest::get(&url).await.unwrap();
        let (body, cut) = read_body_prefix(resp, ERROR_BODY_MAX).await;
        assert!(cut);
        assert_eq!(body.len(), ERROR_BODY_MAX);
    }
}
