//! One large blob read as several `Range` requests at once, handed to its consumer in order.
//!
//! A single HTTP stream is bound by one TCP connection: its window over a long round trip, a
//! per-connection cap of the link or the server, one server thread. The parts of a split blob
//! each go over a connection of their own and are written, as they arrive, at their offsets
//! into a spool file (unnamed: it is unlinked as soon as it is created, so nothing is left
//! behind by a kill). The consumer reads the spool in order as far as the parts have written
//! it, and waits for the rest, so the consumer (a hasher, an upload, a disk write) sees one
//! ordinary stream of the blob's bytes. Memory stays at one write buffer per part and one read
//! buffer; disk use is the bytes of the split range.
//!
//! A part that fails (a cut connection, a short or long answer) ends the stream with its error
//! at the point the consumer reaches it; the consumer's own retry continues from where it got to,
//! as with any broken stream. Dropping the stream stops every part.

use super::stream::ByteStream;
use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use fs_err::os::unix::fs::FileExt;
use futures_util::StreamExt;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Bytes gathered from the network before one write into the spool, and the most one read
/// from it hands the consumer.
const BUF: usize = 1024 * 1024;

/// How a range of a blob is split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Most parts (connections) for one blob.
    pub parts: usize,
    /// Fewest bytes in a part: a range shorter than two of these is not split.
    pub min_part: u64,
}

impl Split {
    /// The part boundaries of `[from, to)`: `(start, end)` pairs, in order, covering it. One
    /// part when the range is too short to split or splitting is off.
    pub fn parts_of(&self, from: u64, to: u64) -> Vec<(u64, u64)> {
        let len = to.saturating_sub(from);
        let n = len
            .checked_div(self.min_part)
            .map_or(self.parts, |n| n.min(self.parts as u64) as usize)
            .max(1);
        let step = len.div_ceil(n as u64).max(1);
        let mut out = Vec::with_capacity(n);
        let mut start = from;
        while start < to {
            let end = (start + step).min(to);
            out.push((start, end));
            start = end;
        }
        if out.is_empty() {
            out.push((from, to));
        }
        out
    }
}

/// What the parts share with the consumer.
struct Shared {
    file: fs_err::File,
    /// Per part: its range and how many of its bytes are in the spool (a prefix).
    parts: Vec<(u64, u64, AtomicU64)>,
    /// The first failure of any part.
    failed: Mutex<Option<io::Error>>,
    /// Woken after every write and at every failure.
    progress: Notify,
}

/// Aborts the part tasks when the consumer drops the stream.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Streams `[from, to)` of a blob fetched as the parts `ranges` (from [`Split::parts_of`]), each
/// opened by `open(start, end)` (whose stream must yield exactly those bytes), through a spool
/// file created in `spool_dir`. `first` is the first part's stream, already opened (the caller
/// has checked that the source honours `Range`).
pub fn spooled<F, Fut>(
    spool_dir: &Path,
    ranges: Vec<(u64, u64)>,
    first: ByteStream,
    open: F,
) -> Result<ByteStream>
where
    F: Fn(u64, u64) -> Fut,
    Fut: Future<Output = Result<ByteStream>> + Send + 'static,
{
    let Some(&(from, _)) = ranges.first() else {
        bail!("nothing to fetch");
    };
    let to = ranges.last().map_or(from, |r| r.1);
    fs_err::create_dir_all(spool_dir)?;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let path = spool_dir.join(format!(
        "spool-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let file = fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .context("creating the spool file")?;
    // Unnamed from here on: the kernel frees it when the last handle closes.
    fs_err::remove_file(&path)?;
    let shared = Arc::new(Shared {
        file,
        parts: ranges
            .iter()
            .map(|&(s, e)| (s, e, AtomicU64::new(0)))
            .collect(),
        failed: Mutex::new(None),
        progress: Notify::new(),
    });
    let mut tasks = Vec::with_capacity(ranges.len());
    let mut first = Some(first);
    for (i, &(start, end)) in ranges.iter().enumerate() {
        let shared = shared.clone();
        let opened = first.take();
        let opening = (opened.is_none()).then(|| open(start, end));
        tasks.push(tokio::spawn(async move {
            let result = async {
                let stream = match (opened, opening) {
                    (Some(s), _) => s,
                    (None, Some(f)) => f.await?,
                    (None, None) => unreachable!("every part is either open or opening"),
                };
                fill(&shared, i, stream).await
            }
            .await;
            if let Err(e) = result {
                let transient = super::retry::is_transient(&e);
                let kind = if transient {
                    io::ErrorKind::ConnectionAborted
                } else {
                    io::ErrorKind::Other
                };
                let err = io::Error::new(
                    kind,
                    format!("bytes {start}-{} of the blob: {e:#}", end - 1),
                );
                shared
                    .failed
                    .lock()
                    .expect("spool failure slot poisoned")
                    .get_or_insert(err);
                shared.progress.notify_waiters();
            }
        }));
    }
    let state = Reader {
        shared,
        at: from,
        to,
        _tasks: Tasks(tasks),
    };
    Ok(Box::pin(futures_util::stream::unfold(
        state,
        |mut r| async move {
            match r.next().await {
                Ok(Some(bytes)) => Some((Ok(bytes), r)),
                Ok(None) => None,
                Err(e) => {
                    // Ends the stream after its error.
                    r.at = r.to;
                    Some((Err(e), r))
                }
            }
        },
    )))
}

/// Writes one part's stream into the spool at its offsets.
async fn fill(shared: &Arc<Shared>, i: usize, mut stream: ByteStream) -> Result<()> {
    let (start, end, _) = shared.parts[i];
    let mut at = start;
    let mut buf = BytesMut::with_capacity(BUF);
    loop {
        let chunk = stream.next().await.transpose()?;
        let done = chunk.is_none();
        if let Some(c) = chunk {
            if at + (buf.len() + c.len()) as u64 > end {
                bail!(
                    "the source sent more than the {} bytes asked for",
                    end - start
                );
            }
            buf.extend_from_slice(&c);
        }
        if buf.len() >= BUF || (done && !buf.is_empty()) {
            let full = std::mem::replace(&mut buf, BytesMut::with_capacity(BUF)).freeze();
            let len = full.len() as u64;
            let writer = shared.clone();
            tokio::task::spawn_blocking(move || writer.file.write_all_at(&full, at))
                .await
                .context("the spool writer stopped")?
                .context("writing the spool file")?;
            at += len;
            shared.parts[i].2.store(at - start, Ordering::Release);
            shared.progress.notify_waiters();
        }
        if done {
            break;
        }
    }
    if at != end {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "the source ended after {} of {} bytes",
                at - start,
                end - start
            ),
        )
        .into());
    }
    Ok(())
}

/// The consumer's side: where it is, and what it waits for.
struct Reader {
    shared: Arc<Shared>,
    at: u64,
    to: u64,
    _tasks: Tasks,
}

impl Reader {
    /// The next bytes in order, waiting for the part that holds them.
    async fn next(&mut self) -> io::Result<Option<Bytes>> {
        if self.at >= self.to {
            return Ok(None);
        }
        loop {
            let notified = self.shared.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (start, end, written) = self
                .shared
                .parts
                .iter()
                .find(|(s, e, _)| (*s..*e).contains(&self.at))
                .expect("the parts cover the range");
            let ready = start + written.load(Ordering::Acquire);
            if self.at < ready {
                let len = (ready - self.at).min(BUF as u64) as usize;
                let (at, shared) = (self.at, self.shared.clone());
                let bytes = tokio::task::spawn_blocking(move || {
                    let mut v = vec![0u8; len];
                    shared.file.read_exact_at(&mut v, at).map(|()| v)
                })
                .await
                .map_err(io::Error::other)??;
                self.at += len as u64;
                debug_assert!(self.at <= *end);
                return Ok(Some(Bytes::from(bytes)));
            }
            if let Some(e) = self
                .shared
                .failed
                .lock()
                .expect("spool failure slot poisoned")
                .take()
            {
                return Err(e);
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn source(data: Arc<Vec<u8>>, start: u64, end: u64, piece: usize) -> ByteStream {
        let slice = data[start as usize..end as usize].to_vec();
        let pieces: Vec<io::Result<Bytes>> = slice
            .chunks(piece)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        Box::pin(futures_util::stream::iter(pieces))
    }

    async fn collect(mut s: ByteStream) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(b) = s.next().await {
            out.extend_from_slice(&b?);
        }
        Ok(out)
    }

    #[test]
    fn parts_cover_the_range_without_gaps_and_respect_the_minimum() {
        let s = Split {
            parts: 4,
            min_part: 100,
        };
        assert_eq!(s.parts_of(0, 150), vec![(0, 150)]);
        assert_eq!(s.parts_of(0, 200), vec![(0, 100), (100, 200)]);
        assert_eq!(
            s.parts_of(10, 1010),
            vec![(10, 260), (260, 510), (510, 760), (760, 1010)]
        );
        let odd = s.parts_of(3, 1004);
        assert_eq!(odd.first().unwrap().0, 3);
        assert_eq!(odd.last().unwrap().1, 1004);
        assert!(odd.windows(2).all(|w| w[0].1 == w[1].0));
    }

    /// The consumer gets the bytes in order, whichever part arrives first, and from a middle
    /// offset; the spool leaves no file behind.
    #[tokio::test]
    async fn parts_arrive_in_any_order_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(5 * BUF + 12345));
        let from = 777u64;
        let to = data.len() as u64;
        let split = Split {
            parts: 4,
            min_part: 1,
        };
        let ranges = split.parts_of(from, to);
        assert_eq!(ranges.len(), 4);
        let first = source(data.clone(), ranges[0].0, ranges[0].1, 4096);
        let d = data.clone();
        let stream = spooled(dir.path(), ranges, first, move |s, e| {
            let d = d.clone();
            async move {
                // Later parts come sooner: the last one at once, the others after a delay.
                if e != d.len() as u64 {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Ok(source(d, s, e, 65536))
            }
        })
        .unwrap();
        let got = collect(stream).await.unwrap();
        assert_eq!(got, data[from as usize..]);
        assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// A part that ends short fails the stream when the consumer reaches it, with a transient
    /// kind (the consumer's retry continues from where it got to); the bytes before it came.
    #[tokio::test]
    async fn a_short_part_ends_the_stream_with_a_transient_error() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(3 * BUF));
        let ranges = Split {
            parts: 3,
            min_part: 1,
        }
        .parts_of(0, data.len() as u64);
        let first = source(data.clone(), ranges[0].0, ranges[0].1, 8192);
        let d = data.clone();
        let cut_at = ranges[1].0;
        let mut stream = spooled(dir.path(), ranges, first, move |s, e| {
            let d = d.clone();
            async move {
                let end = if s == cut_at { s + 1000 } else { e };
                Ok(source(d, s, end, 8192))
            }
        })
        .unwrap();
        let mut got = 0u64;
        let err = loop {
            match stream.next().await {
                Some(Ok(b)) => got += b.len() as u64,
                Some(Err(e)) => break e,
                None => panic!("the stream ended without the part's error"),
            }
        };
        assert!(got >= cut_at, "{got}");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted, "{err}");
        assert!(err.to_string().contains("ended after 1000"), "{err}");
        assert!(stream.next().await.is_none());
    }

    /// A part that sends more than asked is refused (a source ignoring the range end).
    #[tokio::test]
    async fn a_long_part_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(2 * BUF));
        let ranges = vec![(0, BUF as u64), (BUF as u64, 2 * BUF as u64 - 10)];
        let first = source(data.clone(), 0, BUF as u64, 8192);
        let d = data.clone();
        let stream = spooled(dir.path(), ranges, first, move |s, _| {
            let d = d.clone();
            async move { Ok(source(d.clone(), s, d.len() as u64, 8192)) }
        })
        .unwrap();
        let err = collect(stream).await.unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
    }
}
