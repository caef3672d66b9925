//! A blob this run made rather than copied (a rebuilt catalog's configs layer, a rebuilt
//! config, a packaged Helm chart): no source holds it, so its bytes travel with the plan until
//! they are written. Small ones are held in memory; a layer, which grows with the catalog, is
//! written to an unlinked temporary file (in TMPDIR) as it is made and read back as a stream,
//! so a run holds no layer in memory whatever the catalog's size.

use crate::oci::layers::SpanReader;
use crate::oci::stream::{ByteStream, CHUNK};
use bytes::Bytes;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// The bytes of a blob this run made.
#[derive(Clone, Debug)]
pub enum MadeBlob {
    /// Held in memory.
    Memory(Bytes),
    /// In an unlinked temporary file, removed by the system when the last clone is dropped.
    Spooled {
        /// The file (read with positioned reads: several readers at once share no cursor).
        file: Arc<fs_err::File>,
        /// Its length.
        len: u64,
    },
}

impl MadeBlob {
    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            MadeBlob::Memory(b) => b.len() as u64,
            MadeBlob::Spooled { len, .. } => *len,
        }
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its bytes from `offset` on, in chunks of at most [`CHUNK`] (one chunk when in memory).
    pub fn stream_from(&self, offset: u64) -> ByteStream {
        match self {
            MadeBlob::Memory(b) => {
                let rest = b.slice((offset.min(b.len() as u64)) as usize..);
                Box::pin(futures_util::stream::once(async move { Ok(rest) }))
            }
            MadeBlob::Spooled { file, len } => {
                let (file, len) = (file.clone(), *len);
                Box::pin(futures_util::stream::try_unfold(offset, move |at| {
                    let file = file.clone();
                    async move {
                        if at >= len {
                            return Ok(None);
                        }
                        let want = CHUNK.min(usize::try_from(len - at).unwrap_or(CHUNK));
                        let chunk = tokio::task::spawn_blocking(move || {
                            let mut buf = vec![0; want];
                            file.file().read_exact_at(&mut buf, at).map_err(|e| {
                                io::Error::new(e.kind(), format!("{}: {e}", file.path().display()))
                            })?;
                            Ok::<_, io::Error>(buf)
                        })
                        .await
                        .map_err(io::Error::other)??;
                        Ok(Some((Bytes::from(chunk), at + want as u64)))
                    }
                }))
            }
        }
    }

    /// A reader of all its bytes (blocking reads).
    pub fn reader(&self) -> Box<dyn Read + Send> {
        match self {
            MadeBlob::Memory(b) => Box::new(io::Cursor::new(b.clone())),
            MadeBlob::Spooled { file, len } => Box::new(SpanReader::new(file.clone(), 0, *len)),
        }
    }

    /// All its bytes in memory (tests, and callers that know it is small).
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        match self {
            MadeBlob::Memory(b) => Ok(b.clone()),
            MadeBlob::Spooled { len, .. } => {
                let mut out = Vec::with_capacity(usize::try_from(*len).unwrap_or(0));
                self.reader().read_to_end(&mut out)?;
                Ok(Bytes::from(out))
            }
        }
    }
}

impl From<Bytes> for MadeBlob {
    fn from(b: Bytes) -> Self {
        MadeBlob::Memory(b)
    }
}

/// Writes a [`MadeBlob`] to an unlinked temporary file in TMPDIR, through a 256 KiB buffer.
pub struct SpoolWriter {
    file: io::BufWriter<fs_err::File>,
    len: u64,
}

impl SpoolWriter {
    /// A new, empty spool; `what` names it in errors (`the rebuilt catalog layer`).
    pub fn new(what: &str) -> io::Result<Self> {
        let file = tempfile::tempfile().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot make a temporary file for {what} in {} ({e}); set TMPDIR to a writable directory",
                    std::env::temp_dir().display()
                ),
            )
        })?;
        let path = std::env::temp_dir().join(format!("(unlinked: {what})"));
        Ok(SpoolWriter {
            file: io::BufWriter::with_capacity(CHUNK, fs_err::File::from_parts(file, path)),
            len: 0,
        })
    }

    /// The blob written.
    pub fn finish(self) -> io::Result<MadeBlob> {
        let file = self.file.into_inner().map_err(|e| e.into_error())?;
        Ok(MadeBlob::Spooled {
            file: Arc::new(file),
            len: self.len,
        })
    }
}

impl Write for SpoolWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::TryStreamExt as _;

    /// A spooled blob reads back whole, from any offset, in chunks, and by several readers at
    /// once; memory and spool give the same bytes.
    #[tokio::test]
    async fn a_spooled_blob_reads_back_from_any_offset() {
        let data: Vec<u8> = (0..(CHUNK * 2 + 123)).map(|i| (i % 251) as u8).collect();
        let mut w = SpoolWriter::new("a test blob").unwrap();
        for part in data.chunks(1000) {
            w.write_all(part).unwrap();
        }
        let spooled = w.finish().unwrap();
        let memory = MadeBlob::from(Bytes::from(data.clone()));
        assert_eq!(spooled.len(), data.len() as u64);
        for blob in [&spooled, &memory] {
            assert_eq!(blob.to_bytes().unwrap(), data);
            for offset in [0, 1, CHUNK as u64, data.len() as u64 - 1, data.len() as u64] {
                let chunks: Vec<Bytes> = blob.stream_from(offset).try_collect().await.unwrap();
                if matches!(blob, MadeBlob::Spooled { .. }) {
                    assert!(chunks.iter().all(|c| c.len() <= CHUNK));
                }
                assert_eq!(chunks.concat(), &data[offset as usize..], "from {offset}");
            }
        }
        let (a, b) = (spooled.stream_from(5), spooled.stream_from(CHUNK as u64));
        let (a, b): (Vec<Bytes>, Vec<Bytes>) = (
            a.try_collect().await.unwrap(),
            b.try_collect().await.unwrap(),
        );
        assert_eq!(
            (a.concat(), b.concat()),
            (data[5..].to_vec(), data[CHUNK..].to_vec())
        );
    }
}
