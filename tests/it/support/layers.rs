//! Deterministic synthetic layers: real `tar.gz` archives around seeded random (incompressible)
//! content, so sizes on the wire are real, `diff_ids` are right, and a runtime could unpack them.
//!
//! The same [`LayerSpec`] always yields the same bytes and digest, so a layer can be generated
//! twice instead of being held in memory: once to learn its digest, once to stream it out.
//!
//! The gzip stream uses stored (uncompressed) deflate blocks, valid RFC 1951 and what any
//! compressor emits for random data anyway; it costs no compression time, which matters since
//! tests run unoptimised. Hashing uses aws-lc-rs (optimised C even in debug builds) for the
//! same reason.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::{LazyLock, Mutex};

use aws_lc_rs::digest::{Context as Sha256, SHA256};
use bytes::Bytes;

/// Layers at most this large are built in memory and uploaded in one `PUT`; larger ones are
/// generated while they stream out in [`STREAM_CHUNK`]-sized `PATCH`es.
pub const IN_MEMORY_LIMIT: u64 = 1024 * 1024;

/// The chunk size of streamed layers (at most ~3 chunks are alive at once).
pub const STREAM_CHUNK: usize = 1024 * 1024;

/// One synthetic layer: a tar holding `synthetic/` and `synthetic/<seed>.bin` with `size`
/// random bytes drawn from `seed`, gzip-compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LayerSpec {
    /// Seed of the content; equal specs give byte-identical layers (a shared layer).
    pub seed: u64,
    /// Size of the random file inside the tar (the compressed blob is slightly larger).
    pub size: u64,
}

impl LayerSpec {
    /// A layer of `size` random bytes from `seed`.
    pub fn new(seed: u64, size: u64) -> Self {
        LayerSpec { seed, size }
    }
}

/// What a layer hashes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerInfo {
    /// `sha256:…` of the compressed blob (the manifest's layer digest).
    pub digest: String,
    /// `sha256:…` of the uncompressed tar (the config's `rootfs.diff_ids` entry).
    pub diff_id: String,
    /// Size of the compressed blob in bytes.
    pub size: u64,
}

/// SplitMix64: small, fast, deterministic across platforms and crate versions; its output does
/// not compress, which is all a synthetic layer needs.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let v = self.next_u64().to_le_bytes();
            let n = rest.len();
            rest.copy_from_slice(&v[..n]);
        }
    }
}

/// Derives an independent seed from `seed` and a small index (for the layers of a set).
pub fn derive_seed(seed: u64, index: u64) -> u64 {
    Rng::new(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}

struct RandomReader {
    rng: Rng,
    remaining: u64,
}

impl Read for RandomReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.remaining as usize);
        // Whole 8-byte words only (except at the end), so the stream does not depend on how
        // the reader is called.
        let n = if n >= 8 { n - n % 8 } else { n };
        self.rng.fill(&mut buf[..n]);
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// A writer that hashes (SHA-256) and counts what passes through it.
pub struct HashWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: Write> HashWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        HashWriter {
            inner,
            hasher: Sha256::new(&SHA256),
            count: 0,
        }
    }

    /// The inner writer, `sha256:<hex>` and the byte count.
    pub fn finish(self) -> (W, String, u64) {
        let digest = format!("sha256:{}", hex(self.hasher.finish().as_ref()));
        (self.inner, digest, self.count)
    }
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!(
        "sha256:{}",
        hex(aws_lc_rs::digest::digest(&SHA256, data).as_ref())
    )
}

/// The largest stored deflate block.
const STORED_BLOCK: usize = 65_535;

/// A gzip (RFC 1952) writer whose deflate stream is made of stored blocks: fixed header (no
/// name, mtime 0, OS unknown), 64 KiB - 1 blocks, CRC-32 and size trailer.
pub struct StoredGzWriter<W: Write> {
    inner: W,
    crc: flate2::Crc,
    block: Vec<u8>,
    header_done: bool,
}

impl<W: Write> StoredGzWriter<W> {
    /// Writes gzip to `inner`.
    pub fn new(inner: W) -> Self {
        StoredGzWriter {
            inner,
            crc: flate2::Crc::new(),
            block: Vec::with_capacity(STORED_BLOCK),
            header_done: false,
        }
    }

    fn header(&mut self) -> io::Result<()> {
        if !self.header_done {
            self.inner
                .write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])?;
            self.header_done = true;
        }
        Ok(())
    }

    fn emit(&mut self, last: bool) -> io::Result<()> {
        self.header()?;
        let len = self.block.len() as u16;
        let mut head = [u8::from(last), 0, 0, 0, 0];
        head[1..3].copy_from_slice(&len.to_le_bytes());
        head[3..5].copy_from_slice(&(!len).to_le_bytes());
        self.inner.write_all(&head)?;
        self.inner.write_all(&self.block)?;
        self.block.clear();
        Ok(())
    }

    /// Ends the stream (final block, trailer) and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.emit(true)?;
        self.inner.write_all(&self.crc.sum().to_le_bytes())?;
        self.inner.write_all(&self.crc.amount().to_le_bytes())?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for StoredGzWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = (STORED_BLOCK - self.block.len()).min(data.len());
        self.block.extend_from_slice(&data[..n]);
        self.crc.update(&data[..n]);
        if self.block.len() == STORED_BLOCK {
            self.emit(false)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the layer's `tar.gz` bytes to `out`; returns `out` and what the layer hashes to.
pub fn write_layer<W: Write>(spec: &LayerSpec, out: W) -> io::Result<(W, LayerInfo)> {
    let gz = StoredGzWriter::new(HashWriter::new(out));
    let mut builder = tar::Builder::new(HashWriter::new(gz));
    builder.mode(tar::HeaderMode::Deterministic);

    let mut dir = tar::Header::new_ustar();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_size(0);
    dir.set_mode(0o755);
    dir.set_mtime(0);
    dir.set_uid(0);
    dir.set_gid(0);
    builder.append_data(&mut dir, "synthetic/", io::empty())?;

    let mut file = tar::Header::new_ustar();
    file.set_entry_type(tar::EntryType::Regular);
    file.set_size(spec.size);
    file.set_mode(0o644);
    file.set_mtime(0);
    file.set_uid(0);
    file.set_gid(0);
    let reader = RandomReader {
        rng: Rng::new(spec.seed),
        remaining: spec.size,
    };
    builder.append_data(
        &mut file,
        format!("synthetic/{:016x}.bin", spec.seed),
        reader,
    )?;

    let (gz, diff_id, _) = builder.into_inner()?.finish();
    let (out, digest, size) = gz.finish()?.finish();
    Ok((
        out,
        LayerInfo {
            digest,
            diff_id,
            size,
        },
    ))
}

static INFO_CACHE: LazyLock<Mutex<HashMap<LayerSpec, LayerInfo>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// What `spec` hashes to, computed once per process (by generating it into a sink).
pub fn layer_info(spec: &LayerSpec) -> LayerInfo {
    if let Some(info) = INFO_CACHE.lock().unwrap().get(spec) {
        return info.clone();
    }
    let (_, info) = write_layer(spec, io::sink()).expect("generating a layer into a sink");
    INFO_CACHE.lock().unwrap().insert(*spec, info.clone());
    info
}

/// The whole layer in memory (meant for small layers) and its info.
pub fn layer_bytes(spec: &LayerSpec) -> (Vec<u8>, LayerInfo) {
    let (bytes, info) = write_layer(spec, Vec::new()).expect("generating a layer in memory");
    INFO_CACHE.lock().unwrap().insert(*spec, info.clone());
    (bytes, info)
}

/// A writer that cuts what it is given into `chunk`-sized [`Bytes`] and sends them down a
/// channel (blocking), for a producer thread feeding an async upload.
pub struct ChunkSink {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    buf: Vec<u8>,
    chunk: usize,
}

impl ChunkSink {
    /// Sends chunks of `chunk` bytes to `tx`.
    pub fn new(tx: tokio::sync::mpsc::Sender<Bytes>, chunk: usize) -> Self {
        ChunkSink {
            tx,
            buf: Vec::with_capacity(chunk),
            chunk,
        }
    }

    /// Sends what is left (a last, shorter chunk).
    pub fn finish(mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let last = std::mem::take(&mut self.buf);
            self.send(last)?;
        }
        Ok(())
    }

    fn send(&mut self, data: Vec<u8>) -> io::Result<()> {
        self.tx
            .blocking_send(Bytes::from(data))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "upload stopped reading"))
    }
}

impl Write for ChunkSink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = self.chunk - self.buf.len();
        let n = room.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == self.chunk {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk));
            self.send(full)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
