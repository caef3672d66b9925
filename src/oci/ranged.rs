//! One large blob read as several `Range` requests at once, handed to its consumer in order.
//!
//! A single HTTP stream is bound by one TCP connection: its window over a long round trip, a
//! per-connection cap of the link or the server, one server thread. A split blob is read in
//! pieces of [`Split::piece`] bytes, one `Range` request each, by [`Split::parts`] workers at
//! once, each over a connection of its own, in the blob's order. What arrives is written into a
//! ring of one slot per worker in a spool file (unnamed: it is unlinked as soon as it is created,
//! so nothing is left behind by a kill), and the consumer reads the ring in order, so it (a
//! hasher, a disk write, an upload) sees one ordinary stream of the blob's bytes.
//!
//! A worker takes the next piece only when its slot is free, that is when the consumer has
//! reached the piece one ring behind it: the spool never runs more than `parts` pieces ahead of
//! the consumer. That bounds the disk it uses (`parts * piece` bytes) and what a kill throws
//! away (the bytes fetched but not yet consumed), however large the blob. Memory stays at one
//! write buffer per worker and one read buffer.
//!
//! A piece that fails (a cut connection, a short or long answer) ends the stream with its error
//! when the consumer reaches it; the consumer's own retry continues from where it got to, as
//! with any broken stream. Dropping the stream stops every worker.
//!
//! [`adaptive`] decides when to split. Every connection beyond the one its transfer holds is a
//! permit of the source registry's gate (`--max-connections-per-registry`), taken only when
//! free: a blob opened while the registry's connections are all busy starts as one stream, and
//! is split from wherever it has got to once other transfers free some (checked at every piece
//! boundary), so the limit holds and a large blob left alone at the end of a run still spreads
//! over the connections the others gave back.

use super::stream::ByteStream;
use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use fs_err::os::unix::fs::FileExt;
use futures_util::StreamExt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// Bytes gathered from the network before one write into the spool, and the most one read
/// from it hands the consumer.
const BUF: usize = 256 * 1024;

/// A slot of the ring that holds no piece.
const EMPTY: u64 = u64::MAX;

/// How a large blob is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Workers (connections) for one blob, and slots of its ring; 1 turns splitting off.
    pub parts: usize,
    /// Bytes per `Range` request.
    pub piece: u64,
    /// Only the rest of a blob at least this large is split.
    pub from_size: u64,
}

impl Split {
    /// Whether `len` more bytes of a blob are read split.
    pub fn splits(&self, len: u64) -> bool {
        self.parts > 1 && self.piece > 0 && len >= self.from_size && len > self.piece
    }

    /// Spool bytes one split blob uses at most.
    pub fn spool_bytes(&self) -> u64 {
        self.piece.saturating_mul(self.parts as u64)
    }
}

/// What a `Range` read of a piece gave.
pub enum Piece {
    /// The bytes asked for (`206`).
    Range(ByteStream),
    /// The whole blob from byte 0 (`200`): the source ignores `Range`.
    Whole(ByteStream),
}

/// Streams `[from, to)` of a blob: split at once when `split` allows it and `gate` has a free
/// permit, else as one stream opened by `single(offset)` that is split from where it has got to
/// when a permit comes free (see the module's documentation). `open(start, end)` reads one
/// piece, `once` when it must not be retried (a switch mid-stream: the stream it would replace
/// waits meanwhile, and a failure there spends nothing of the blob's retries). A split holds the
/// permits it took while its workers have pieces to fetch; the transfer's own connection is not
/// counted here (its caller holds that permit). A source that ignores `Range` is read as one
/// stream to the end; a failed attempt to split mid-stream keeps the stream it had (the piece is
/// opened before that stream is let go) and is not tried again.
pub async fn adaptive<S, SF, O, OF>(
    spool_dir: &Path,
    split: Split,
    (from, to): (u64, u64),
    gate: Arc<Semaphore>,
    single: S,
    open: O,
) -> Result<ByteStream>
where
    S: Fn(u64) -> SF + Send + Sync + 'static,
    SF: Future<Output = Result<ByteStream>> + Send + 'static,
    O: Fn(u64, u64, bool) -> OF + Send + Sync + 'static,
    OF: Future<Output = Result<Piece>> + Send + 'static,
{
    let splitter = Arc::new(Splitter {
        dir: spool_dir.to_path_buf(),
        split,
        to,
        gate,
        open: Arc::new(move |start, end, once| Box::pin(open(start, end, once)) as _),
    });
    let stream = match splitter.try_split(from, false).await? {
        Tried::Split(s) => return Ok(s),
        Tried::Whole(s) if from == 0 => return Ok(s),
        Tried::Whole(_) => return single(from).await,
        Tried::No => single(from).await?,
    };
    let state = Adaptive {
        splitter,
        pos: from,
        next_check: from + split.piece,
        stream,
        split: false,
    };
    Ok(Box::pin(futures_util::stream::unfold(
        state,
        |mut a| async move {
            let item = a.stream.next().await?;
            if let Ok(bytes) = &item {
                a.pos += bytes.len() as u64;
                if !a.split && a.pos >= a.next_check && a.pos < a.splitter.to {
                    a.next_check = a.pos + a.splitter.split.piece;
                    a.try_split().await;
                }
            }
            Some((item, a))
        },
    )))
}

type PieceOpener = dyn Fn(u64, u64, bool) -> std::pin::Pin<Box<dyn Future<Output = Result<Piece>> + Send>>
    + Send
    + Sync;

/// The longest a switch mid-stream waits for its first piece to answer (the stream it would
/// replace is not read meanwhile).
const SWITCH_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How [`adaptive`] splits the rest of a blob.
struct Splitter {
    dir: PathBuf,
    split: Split,
    to: u64,
    gate: Arc<Semaphore>,
    open: Arc<PieceOpener>,
}

enum Tried {
    /// Split from the offset asked for.
    Split(ByteStream),
    /// The source ignored `Range`: the whole blob from byte 0.
    Whole(ByteStream),
    /// Not split (too little left, or no free permit).
    No,
}

impl Splitter {
    /// Splits the rest from `pos` if it is long enough and the gate has a free permit: the
    /// first piece is opened under one of the permits taken, so the caller's stream may stay
    /// open until it is known to be replaced.
    async fn try_split(&self, pos: u64, once: bool) -> Result<Tried> {
        if !self.split.splits(self.to.saturating_sub(pos)) {
            return Ok(Tried::No);
        }
        let Some(permits) = (1..self.split.parts)
            .rev()
            .find_map(|n| self.gate.clone().try_acquire_many_owned(n as u32).ok())
        else {
            return Ok(Tried::No);
        };
        let end = (pos + self.split.piece).min(self.to);
        let opened = (self.open)(pos, end, once);
        let opened = match once {
            true => tokio::time::timeout(SWITCH_WAIT, opened)
                .await
                .map_err(|_| anyhow::anyhow!("no answer within {SWITCH_WAIT:?}"))?,
            false => opened.await,
        };
        let first = match opened? {
            Piece::Range(s) => s,
            Piece::Whole(s) => return Ok(Tried::Whole(s)),
        };
        let parts = 1 + permits.num_permits();
        let open = self.open.clone();
        let pieces = move |start, end| {
            let open = open.clone();
            async move {
                match open(start, end, false).await? {
                    Piece::Range(s) => Ok(s),
                    Piece::Whole(_) => bail!("the source ignored the Range request"),
                }
            }
        };
        let split = Split {
            parts,
            ..self.split
        };
        let stream = spooled(
            &self.dir,
            split,
            (pos, self.to),
            first,
            pieces,
            Some(permits),
        )?;
        Ok(Tried::Split(stream))
    }
}

/// One stream that may become a split one.
struct Adaptive {
    splitter: Arc<Splitter>,
    pos: u64,
    next_check: u64,
    stream: ByteStream,
    /// Split already, or never to be (the source ignores `Range`).
    split: bool,
}

impl Adaptive {
    /// Replaces the stream by a split of the rest, if the gate has a permit free now.
    async fn try_split(&mut self) {
        if self.splitter.gate.available_permits() == 0 {
            return;
        }
        match self.splitter.try_split(self.pos, true).await {
            Ok(Tried::Split(s)) => {
                tracing::debug!("splitting the rest of a blob from byte {}", self.pos);
                self.stream = s;
                self.split = true;
            }
            Ok(Tried::Whole(_)) => self.split = true,
            Ok(Tried::No) => {}
            // The stream it had goes on, and stays one stream.
            Err(e) => {
                tracing::debug!("not splitting at byte {}: {e:#}", self.pos);
                self.split = true;
            }
        }
    }
}

/// What the workers share with the consumer.
struct Shared {
    file: fs_err::File,
    from: u64,
    to: u64,
    piece: u64,
    /// The first piece's stream, opened by the caller.
    first: Mutex<Option<ByteStream>>,
    /// Connection permits the workers beyond the first hold: one is given back as each worker
    /// runs out of pieces (or fails), so a blob whose rest is spooled holds none.
    permits: Mutex<Option<OwnedSemaphorePermit>>,
    /// The next piece a worker takes.
    next: AtomicU64,
    /// The piece the consumer reads (all before it are consumed).
    consumed: AtomicU64,
    /// Per slot: the piece it holds (or [`EMPTY`]) and how many of its bytes are written.
    slots: Vec<(AtomicU64, AtomicU64)>,
    /// The first failure of any piece, with the piece: the consumer sees it on reaching it.
    failed: Mutex<Option<(u64, io::Error)>>,
    /// Woken after every write and at every failure (the consumer waits on it).
    written: Notify,
    /// Woken when the consumer finishes a piece (workers wait on it for a free slot).
    freed: Notify,
}

impl Shared {
    fn pieces(&self) -> u64 {
        (self.to - self.from).div_ceil(self.piece)
    }

    /// Bytes `[start, end)` of the blob that piece `k` covers.
    fn range(&self, k: u64) -> (u64, u64) {
        let start = self.from + k * self.piece;
        (start, (start + self.piece).min(self.to))
    }

    fn slot(&self, k: u64) -> (usize, u64) {
        let i = (k % self.slots.len() as u64) as usize;
        (i, i as u64 * self.piece)
    }

    fn fail(&self, k: u64, err: io::Error) {
        let mut failed = self.failed.lock().expect("spool failure slot poisoned");
        // The earliest piece's failure is the one the consumer reaches first.
        if failed.as_ref().is_none_or(|(at, _)| k < *at) {
            *failed = Some((k, err));
        }
        drop(failed);
        self.written.notify_waiters();
    }

    /// Gives back one connection permit (a worker is done).
    fn release_one(&self) {
        let mut permits = self.permits.lock().expect("spool permits poisoned");
        let last = permits.as_ref().is_some_and(|p| p.num_permits() <= 1);
        match last {
            true => drop(permits.take()),
            false => drop(permits.as_mut().and_then(|p| p.split(1))),
        }
    }

    /// The failure of piece `k` or one before it, taken (the stream ends with it).
    fn failure_up_to(&self, k: u64) -> Option<io::Error> {
        let mut failed = self.failed.lock().expect("spool failure slot poisoned");
        match *failed {
            Some((at, _)) if at <= k => failed.take().map(|(_, e)| e),
            _ => None,
        }
    }
}

/// Aborts the workers when the consumer drops the stream.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Streams `[from, to)` of a blob read as `split` says, each piece opened by `open(start, end)`
/// (whose stream must yield exactly those bytes), through a spool file created in `spool_dir`.
/// `first` is the first piece's stream, already opened (the caller has checked that the source
/// honours `Range`). `permits`, if any, are given back one per worker as workers finish.
pub fn spooled<F, Fut>(
    spool_dir: &Path,
    split: Split,
    (from, to): (u64, u64),
    first: ByteStream,
    open: F,
    permits: Option<OwnedSemaphorePermit>,
) -> Result<ByteStream>
where
    F: Fn(u64, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ByteStream>> + Send + 'static,
{
    if from >= to || split.piece == 0 {
        bail!("nothing to fetch");
    }
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
    let workers = split.parts.max(1);
    let shared = Arc::new(Shared {
        file,
        from,
        to,
        piece: split.piece,
        first: Mutex::new(Some(first)),
        permits: Mutex::new(permits),
        next: AtomicU64::new(0),
        consumed: AtomicU64::new(0),
        slots: (0..workers)
            .map(|_| (AtomicU64::new(EMPTY), AtomicU64::new(0)))
            .collect(),
        failed: Mutex::new(None),
        written: Notify::new(),
        freed: Notify::new(),
    });
    let open = Arc::new(open);
    let tasks = (0..workers)
        .map(|_| {
            let (shared, open) = (shared.clone(), open.clone());
            tokio::spawn(async move {
                let done = work(&shared, &*open).await;
                shared.release_one();
                if let Err((k, e)) = done {
                    shared.fail(k, e);
                }
            })
        })
        .collect();
    let state = Reader {
        shared,
        at: from,
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
                    r.at = r.shared.to;
                    Some((Err(e), r))
                }
            }
        },
    )))
}

/// One worker: takes the next piece while there is one, waits for its slot, fills it. A failure
/// comes with the piece it hit.
async fn work<F, Fut>(shared: &Arc<Shared>, open: &F) -> Result<(), (u64, io::Error)>
where
    F: Fn(u64, u64) -> Fut,
    Fut: Future<Output = Result<ByteStream>>,
{
    loop {
        let k = shared.next.fetch_add(1, Ordering::Relaxed);
        if k >= shared.pieces() {
            return Ok(());
        }
        let ring = shared.slots.len() as u64;
        loop {
            let freed = shared.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if k < shared.consumed.load(Ordering::Acquire) + ring {
                break;
            }
            freed.await;
        }
        let (start, end) = shared.range(k);
        let failed = |e: anyhow::Error| {
            let kind = if super::retry::is_transient(&e) {
                io::ErrorKind::ConnectionAborted
            } else {
                io::ErrorKind::Other
            };
            let err = io::Error::new(
                kind,
                format!("bytes {start}-{} of the blob: {e:#}", end - 1),
            );
            (k, err)
        };
        let (i, _) = shared.slot(k);
        shared.slots[i].1.store(0, Ordering::Release);
        shared.slots[i].0.store(k, Ordering::Release);
        let opened = match k {
            0 => shared.first.lock().expect("first piece poisoned").take(),
            _ => None,
        };
        let stream = match opened {
            Some(s) => s,
            None => open(start, end).await.map_err(failed)?,
        };
        fill(shared, k, stream).await.map_err(failed)?;
    }
}

/// Writes piece `k`'s stream into its slot.
async fn fill(shared: &Arc<Shared>, k: u64, mut stream: ByteStream) -> Result<()> {
    let (start, end) = shared.range(k);
    let (i, base) = shared.slot(k);
    let mut done = 0u64;
    let want = end - start;
    let mut buf = BytesMut::with_capacity(BUF);
    loop {
        let chunk = stream.next().await.transpose()?;
        let last = chunk.is_none();
        if let Some(c) = chunk {
            if done + (buf.len() + c.len()) as u64 > want {
                bail!("the source sent more than the {want} bytes asked for");
            }
            buf.extend_from_slice(&c);
        }
        if buf.len() >= BUF || (last && !buf.is_empty()) {
            let full = std::mem::replace(&mut buf, BytesMut::with_capacity(BUF)).freeze();
            let len = full.len() as u64;
            let writer = shared.clone();
            let at = base + done;
            tokio::task::spawn_blocking(move || writer.file.write_all_at(&full, at))
                .await
                .context("the spool writer stopped")?
                .context("writing the spool file")?;
            done += len;
            shared.slots[i].1.store(done, Ordering::Release);
            shared.written.notify_waiters();
        }
        if last {
            break;
        }
    }
    if done != want {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the source ended after {done} of {want} bytes"),
        )
        .into());
    }
    Ok(())
}

/// The consumer's side: where it is.
struct Reader {
    shared: Arc<Shared>,
    at: u64,
    _tasks: Tasks,
}

impl Reader {
    /// The next bytes in order, waiting for the piece that holds them.
    async fn next(&mut self) -> io::Result<Option<Bytes>> {
        let shared = &self.shared;
        if self.at >= shared.to {
            return Ok(None);
        }
        let k = (self.at - shared.from) / shared.piece;
        let (start, end) = shared.range(k);
        let (i, base) = shared.slot(k);
        loop {
            let written = shared.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            let (holds, filled) = &shared.slots[i];
            let ready = if holds.load(Ordering::Acquire) == k {
                start + filled.load(Ordering::Acquire)
            } else {
                start
            };
            if self.at < ready {
                let len = (ready - self.at).min(BUF as u64) as usize;
                let (pos, file) = (base + (self.at - start), shared.clone());
                // Allocated here, not on the blocking thread: glibc gives every thread that
                // allocates an arena of its own, and the pool's many threads would each keep one.
                let mut v = vec![0u8; len];
                let bytes = tokio::task::spawn_blocking(move || {
                    file.file.read_exact_at(&mut v, pos).map(|()| v)
                })
                .await
                .map_err(io::Error::other)??;
                self.at += len as u64;
                if self.at == end {
                    shared.consumed.store(k + 1, Ordering::Release);
                    shared.freed.notify_waiters();
                }
                return Ok(Some(Bytes::from(bytes)));
            }
            // A failed piece ends the stream only once the consumer has every byte before it.
            if let Some(e) = shared.failure_up_to(k) {
                return Err(e);
            }
            written.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn source(data: &[u8], start: u64, end: u64, piece: usize) -> ByteStream {
        let pieces: Vec<io::Result<Bytes>> = data[start as usize..end as usize]
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

    fn split(parts: usize, piece: u64) -> Split {
        Split {
            parts,
            piece,
            from_size: 0,
        }
    }

    #[test]
    fn only_large_rests_are_split() {
        let s = Split {
            parts: 4,
            piece: 10,
            from_size: 100,
        };
        assert!(!s.splits(99));
        assert!(s.splits(100));
        assert!(!Split { parts: 1, ..s }.splits(1000));
        assert!(!Split { piece: 200, ..s }.splits(150));
        assert_eq!(s.spool_bytes(), 40);
    }

    /// The consumer gets the bytes in order, from a middle offset, whichever piece arrives
    /// first; the spool never holds more than the ring, and leaves no file behind.
    #[tokio::test]
    async fn pieces_arrive_in_any_order_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(9 * BUF + 12345));
        let from = 777u64;
        let to = data.len() as u64;
        let piece = BUF as u64 + 3;
        let first = source(&data, from, from + piece, 4096);
        let d = data.clone();
        let stream = spooled(
            dir.path(),
            split(3, piece),
            (from, to),
            first,
            move |s, e| {
                let d = d.clone();
                async move {
                    // Pieces come at uneven paces.
                    if (s / piece).is_multiple_of(2) {
                        tokio::time::sleep(std::time::Duration::from_millis(15)).await;
                    }
                    Ok(source(&d, s, e, 65536))
                }
            },
            None,
        )
        .unwrap();
        let got = collect(stream).await.unwrap();
        assert_eq!(got, data[from as usize..]);
        assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Workers never run more than the ring ahead of a consumer that does not read: the
    /// pieces opened are those of the ring, and more only once the consumer moves.
    #[tokio::test]
    async fn the_spool_stays_within_the_ring_of_a_slow_consumer() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(20 * 1024));
        let opened = Arc::new(AtomicU64::new(0));
        let (d, o) = (data.clone(), opened.clone());
        let first = source(&data, 0, 1024, 512);
        let mut stream = spooled(
            dir.path(),
            split(3, 1024),
            (0, data.len() as u64),
            first,
            move |s, e| {
                o.fetch_add(1, Ordering::SeqCst);
                let d = d.clone();
                async move { Ok(source(&d, s, e, 512)) }
            },
            None,
        )
        .unwrap();
        let reaches = |n: u64| {
            let opened = opened.clone();
            async move {
                while opened.load(Ordering::SeqCst) < n {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                // Room for a worker that would wrongly go further.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                opened.load(Ordering::SeqCst)
            }
        };
        // Pieces 1 and 2 (piece 0 came with the stream); piece 3 waits for piece 0's slot.
        assert_eq!(reaches(2).await, 2);
        let mut got = Vec::new();
        while got.len() < 1024 {
            got.extend_from_slice(&stream.next().await.unwrap().unwrap());
        }
        assert_eq!(reaches(3).await, 3);
        got.extend_from_slice(&collect(stream).await.unwrap());
        assert_eq!(got, *data);
    }

    /// A piece that ends short fails the stream when the consumer reaches it, with a transient
    /// kind (the consumer's retry continues from where it got to); the bytes before it came,
    /// even when the failure came first (the first piece is slow here).
    #[tokio::test]
    async fn a_short_piece_ends_the_stream_with_a_transient_error() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(3 * BUF));
        let piece = BUF as u64;
        let late =
            futures_util::stream::once(tokio::time::sleep(std::time::Duration::from_millis(200)))
                .filter_map(|()| async { None::<io::Result<Bytes>> });
        let first: ByteStream = Box::pin(late.chain(source(&data, 0, piece, 8192)));
        let d = data.clone();
        let mut stream = spooled(
            dir.path(),
            split(3, piece),
            (0, data.len() as u64),
            first,
            move |s, e| {
                let d = d.clone();
                async move {
                    let end = if s == piece { s + 1000 } else { e };
                    Ok(source(&d, s, end, 8192))
                }
            },
            None,
        )
        .unwrap();
        let mut got = 0u64;
        let err = loop {
            match stream.next().await {
                Some(Ok(b)) => got += b.len() as u64,
                Some(Err(e)) => break e,
                None => panic!("the stream ended without the piece's error"),
            }
        };
        assert!(got >= piece, "{got}");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted, "{err}");
        assert!(err.to_string().contains("ended after 1000"), "{err}");
        assert!(stream.next().await.is_none());
    }

    /// How the test source answers a `Range` request.
    #[derive(Clone, Copy)]
    enum Answer {
        Range,
        /// The whole blob (it ignores `Range`).
        Whole,
        /// An error to a request that may not be retried (a switch mid-stream), else ranges.
        RefuseSwitch,
    }

    /// Streams of `data` that count how many are open at once (into `open`, peak in `peak`).
    #[derive(Clone, Default)]
    struct Counted {
        open: Arc<AtomicU64>,
        peak: Arc<AtomicU64>,
        ranges: Arc<Mutex<Vec<(u64, u64)>>>,
        singles: Arc<Mutex<Vec<u64>>>,
    }

    impl Counted {
        fn stream(&self, data: &[u8], start: u64, end: u64) -> ByteStream {
            let now = self.open.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            struct Close(Arc<AtomicU64>);
            impl Drop for Close {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let close = Close(self.open.clone());
            Box::pin(source(data, start, end, 8192).map(move |b| {
                let _open = &close;
                b
            }))
        }

        /// `adaptive` over `data` from `from`, the source answering ranges as `answer` says.
        async fn adaptive(
            &self,
            dir: &Path,
            data: &Arc<Vec<u8>>,
            from: u64,
            parts: usize,
            gate: &Arc<Semaphore>,
            answer: Answer,
        ) -> ByteStream {
            let (c, d) = (self.clone(), data.clone());
            let single = move |at: u64| {
                c.singles.lock().unwrap().push(at);
                let s = c.stream(&d, at, d.len() as u64);
                async move { Ok(s) }
            };
            let (c, d) = (self.clone(), data.clone());
            let open = move |start: u64, end: u64, once: bool| {
                c.ranges.lock().unwrap().push((start, end));
                let piece = match answer {
                    Answer::Whole => Ok(Piece::Whole(c.stream(&d, 0, d.len() as u64))),
                    Answer::RefuseSwitch if once => Err(anyhow::anyhow!("503 Service Unavailable")),
                    _ => Ok(Piece::Range(c.stream(&d, start, end))),
                };
                async move { piece }
            };
            let len = data.len() as u64;
            adaptive(
                dir,
                split(parts, BUF as u64),
                (from, len),
                gate.clone(),
                single,
                open,
            )
            .await
            .unwrap()
        }
    }

    /// With every connection of the registry busy a blob starts as one stream; when one comes
    /// free it is split from where it got to, never holding more connections than it was given,
    /// and gives them back when dropped.
    #[tokio::test]
    async fn a_busy_registry_gets_one_stream_that_splits_when_a_connection_frees() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(8 * BUF + 100));
        let gate = Arc::new(Semaphore::new(0));
        let c = Counted::default();
        let mut stream = c
            .adaptive(dir.path(), &data, 0, 4, &gate, Answer::Range)
            .await;
        let mut got = Vec::new();
        while got.len() < 2 * BUF {
            got.extend_from_slice(&stream.next().await.unwrap().unwrap());
        }
        assert!(
            c.ranges.lock().unwrap().is_empty(),
            "split with no free connection"
        );
        gate.add_permits(2);
        got.extend_from_slice(&collect(stream).await.unwrap());
        assert_eq!(got, *data);
        assert_eq!(*c.singles.lock().unwrap(), [0]);
        let ranges = c.ranges.lock().unwrap().clone();
        let mut sorted = ranges.clone();
        sorted.sort();
        let at = sorted[0].0;
        assert!(at >= 2 * BUF as u64 && at < data.len() as u64, "{sorted:?}");
        // The pieces cover the rest exactly.
        for w in sorted.windows(2) {
            assert_eq!(w[0].1, w[1].0, "{sorted:?}");
        }
        assert_eq!(sorted.last().unwrap().1, data.len() as u64);
        // Never more than its own connection and the two it was given.
        let peak = c.peak.load(Ordering::SeqCst);
        assert!((2..=3).contains(&peak), "{peak} streams open at once");
        assert_eq!(c.open.load(Ordering::SeqCst), 0);
        assert_eq!(gate.available_permits(), 2);
    }

    /// A registry with connections free gets the split at once, as wide as those allow; a source
    /// that ignores `Range` is read as the one stream it sent.
    #[tokio::test]
    async fn a_free_registry_splits_at_once_and_a_rangeless_one_never() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(6 * BUF));
        let gate = Arc::new(Semaphore::new(1));
        let c = Counted::default();
        let from = 1000;
        let stream = c
            .adaptive(dir.path(), &data, from, 4, &gate, Answer::Range)
            .await;
        assert_eq!(gate.available_permits(), 0);
        assert_eq!(collect(stream).await.unwrap(), data[from as usize..]);
        assert!(c.singles.lock().unwrap().is_empty());
        assert_eq!(c.ranges.lock().unwrap().len(), 6);
        assert!(c.peak.load(Ordering::SeqCst) <= 2);
        assert_eq!(gate.available_permits(), 1);

        let c = Counted::default();
        let stream = c
            .adaptive(dir.path(), &data, 0, 4, &gate, Answer::Whole)
            .await;
        assert_eq!(collect(stream).await.unwrap(), *data);
        assert_eq!(c.ranges.lock().unwrap().len(), 1);
        assert!(c.singles.lock().unwrap().is_empty());
        assert_eq!(gate.available_permits(), 1);

        // Found mid-stream: the stream it had goes on, and it is not asked again.
        let gate = Arc::new(Semaphore::new(0));
        let c = Counted::default();
        let mut stream = c
            .adaptive(dir.path(), &data, 0, 4, &gate, Answer::Whole)
            .await;
        let mut got = stream.next().await.unwrap().unwrap().to_vec();
        gate.add_permits(3);
        got.extend_from_slice(&collect(stream).await.unwrap());
        assert_eq!(got, *data);
        assert_eq!(c.ranges.lock().unwrap().len(), 1);
        assert_eq!(*c.singles.lock().unwrap(), [0]);
    }

    /// A switch mid-stream whose first piece fails (a registry refusing more connections) keeps
    /// the stream it had, gives its permits back and is not tried again: the blob arrives whole
    /// over its one connection.
    #[tokio::test]
    async fn a_refused_switch_keeps_the_stream_and_is_not_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(8 * BUF));
        let gate = Arc::new(Semaphore::new(0));
        let c = Counted::default();
        let mut stream = c
            .adaptive(dir.path(), &data, 0, 4, &gate, Answer::RefuseSwitch)
            .await;
        let mut got = stream.next().await.unwrap().unwrap().to_vec();
        gate.add_permits(3);
        got.extend_from_slice(&collect(stream).await.unwrap());
        assert_eq!(got, *data);
        assert_eq!(c.ranges.lock().unwrap().len(), 1, "tried again");
        assert_eq!(*c.singles.lock().unwrap(), [0]);
        assert_eq!(gate.available_permits(), 3);
    }

    /// A split gives its permits back as its workers run out of pieces, before the consumer has
    /// read the spooled rest: the registry's connections are free for other blobs.
    #[tokio::test]
    async fn permits_come_back_when_the_workers_are_done_not_when_the_blob_is() {
        let dir = tempfile::tempdir().unwrap();
        // Four pieces, four slots: the workers can fetch everything without the consumer.
        let data = Arc::new(blob(4 * BUF));
        let gate = Arc::new(Semaphore::new(3));
        let c = Counted::default();
        let stream = c
            .adaptive(dir.path(), &data, 0, 4, &gate, Answer::Range)
            .await;
        assert_eq!(gate.available_permits(), 0);
        // Every permit comes back and every piece is read while the consumer has read nothing.
        // The last worker runs on the caller's own connection (not a permit of this gate), so
        // it may still be reading when the three permits are back: both are waited for.
        let mut waited = 0;
        while gate.available_permits() < 3 || c.open.load(Ordering::SeqCst) > 0 {
            waited += 1;
            assert!(
                waited < 500,
                "permits still held: {} of 3 free, pieces being read: {}",
                gate.available_permits(),
                c.open.load(Ordering::SeqCst)
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(collect(stream).await.unwrap(), *data);
    }

    /// A piece that sends more than asked is refused (a source ignoring the range end).
    #[tokio::test]
    async fn a_long_piece_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = Arc::new(blob(2 * BUF));
        let piece = BUF as u64;
        let first = source(&data, 0, piece, 8192);
        let d = data.clone();
        let stream = spooled(
            dir.path(),
            split(2, piece),
            (0, data.len() as u64 - 10),
            first,
            move |s, _| {
                let d = d.clone();
                async move { Ok(source(&d, s, d.len() as u64, 8192)) }
            },
            None,
        )
        .unwrap();
        let err = collect(stream).await.unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
    }
}
