//! Stream adapters for blob bodies: every byte that passes is hashed and counted, and the stream
//! fails at its end when the digest or size is not what was promised. Memory stays bounded by
//! the chunk size whatever the blob size.

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

/// Wraps `inner` so it is hashed and counted as it flows; at the end, a digest or size mismatch
/// (or more bytes than promised, detected as soon as they arrive) becomes an `InvalidData` error
/// naming `what`, so a consumer never commits bad content.
pub fn verified(
    inner: ByteStream,
    what: String,
    expected: Digest,
    size: u64,
    on_bytes: OnBytes,
) -> ByteStream {
    struct State {
        inner: ByteStream,
        hasher: Option<StreamHasher>,
        what: String,
        expected: Digest,
        size: u64,
        on_bytes: OnBytes,
    }
    let state = State {
        inner,
        hasher: Some(StreamHasher::new()),
        what,
        expected,
        size,
        on_bytes,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        let hasher = st.hasher.as_mut()?;
        match st.inner.next().await {
            Some(Ok(chunk)) => {
                hasher.update(&chunk);
                if hasher.len() > st.size {
                    st.hasher = None;
                    let err = io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: more bytes than its size of {}", st.what, st.size),
                    );
                    return Some((Err(err), st));
                }
                (st.on_bytes)(chunk.len() as u64);
                Some((Ok(chunk), st))
            }
            Some(Err(e)) => {
                st.hasher = None;
                Some((Err(e), st))
            }
            None => {
                let hasher = st.hasher.take()?;
                match hasher.verify(&st.what, &st.expected, st.size) {
                    Ok(()) => None,
                    Err(m) => Some((Err(io::Error::new(io::ErrorKind::InvalidData, m)), st)),
                }
            }
        }
    }))
}

/// Reads a file as a stream of chunks, from `offset`.
pub async fn file_stream(path: &std::path::Path, offset: u64) -> io::Result<ByteStream> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))?;
    if offset > 0 {
        file.seek(io::SeekFrom::Start(offset)).await?;
    }
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

    #[tokio::test]
    async fn good_stream_passes_and_counts() {
        let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let s2 = seen.clone();
        let s = verified(
            chunks(&[b"ab", b"c"]),
            "blob".into(),
            Digest::of(b"abc"),
            3,
            Arc::new(move |n| {
                s2.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }),
        );
        let out: Vec<_> = s.collect().await;
        assert!(out.iter().all(|r| r.is_ok()));
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn flipped_byte_fails_at_the_end() {
        let s = verified(
            chunks(&[b"ab", b"d"]),
            "blob x".into(),
            Digest::of(b"abc"),
            3,
            Arc::new(|_| {}),
        );
        let out: Vec<_> = s.collect().await;
        let err = out.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("blob x"));
    }

    #[tokio::test]
    async fn overlong_stream_fails_early() {
        let s = verified(
            chunks(&[b"abcd", b"e"]),
            "blob".into(),
            Digest::of(b"abc"),
            3,
            Arc::new(|_| {}),
        );
        let out: Vec<_> = s.collect().await;
        assert_eq!(out.len(), 1);
        assert!(out[0].is_err());
    }
}
