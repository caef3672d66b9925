//! The spool store of the layer reader: catalog files appended to one unlinked file as the
//! layers stream past, read back as streams (see [`super::spool_config_dir`]).

use super::Store;
use std::collections::BTreeMap;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Files appended to one spool file; a file deleted by a later layer leaves its bytes there.
pub(super) struct Spool {
    file: fs_err::File,
    end: u64,
}

impl Spool {
    /// A store appending to `file` (new and empty).
    pub(super) fn new(file: fs_err::File) -> Self {
        Spool { file, end: 0 }
    }

    /// The spool file.
    pub(super) fn into_file(self) -> fs_err::File {
        self.file
    }
}

impl Store for &mut Spool {
    type Data = Span;

    fn put(&mut self, from: &mut dyn Read, size: u64) -> io::Result<Span> {
        self.file.seek(io::SeekFrom::Start(self.end))?;
        let mut w = io::BufWriter::with_capacity(256 * 1024, &mut self.file);
        let len = io::copy(&mut from.take(size), &mut w)?;
        w.flush()?;
        drop(w);
        let span = Span {
            offset: self.end,
            len,
        };
        self.end += len;
        Ok(span)
    }

    fn len(data: &Span) -> u64 {
        data.len
    }
}

/// Where a spooled file's bytes are in the spool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    offset: u64,
    len: u64,
}

/// The config directory's files, in a spool file: see [`spool_config_dir`].
#[derive(Debug)]
pub struct SpooledFiles {
    file: Arc<fs_err::File>,
    files: BTreeMap<String, Span>,
}

impl SpooledFiles {
    pub(super) fn new(file: Arc<fs_err::File>, files: BTreeMap<String, Span>) -> Self {
        SpooledFiles { file, files }
    }

    /// Every file, sorted by path, with a reader of its bytes.
    pub fn iter(&self) -> impl Iterator<Item = (&str, SpanReader)> {
        self.files.iter().map(|(name, span)| {
            let reader = SpanReader {
                file: self.file.clone(),
                at: span.offset,
                end: span.offset + span.len,
            };
            (name.as_str(), reader)
        })
    }
}

/// Reads one spooled file (positioned reads: readers of several files can be open at once).
#[derive(Debug)]
pub struct SpanReader {
    file: Arc<fs_err::File>,
    at: u64,
    end: u64,
}

impl SpanReader {
    /// Reads `file` from `at` to `end`.
    pub(crate) fn new(file: Arc<fs_err::File>, at: u64, end: u64) -> Self {
        SpanReader { file, at, end }
    }
}

impl Read for SpanReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.end - self.at).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.file().read_at(&mut buf[..want], self.at)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{}: the spool ends early", self.file.path().display()),
            ));
        }
        self.at += n as u64;
        Ok(n)
    }
}
