//! Reading files a user or an attacker may have placed (a disk mirror carried across the air
//! gap): only regular files are opened, never through a symlink, and never read past a bound.
//! A FIFO named like a blob would block `open` for ever, and a symlink to `/dev/zero` would
//! feed an unbounded read; both are refused with an error saying what the path is.

use fs_err::os::unix::fs::OpenOptionsExt;
use std::io::{self, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The most a layout's `index.json`, `SHA256SUMS` or mirror record may be: far beyond a mirror
/// of thousands of images, far below what would hurt to hold in memory.
pub const LAYOUT_FILE_MAX: u64 = 64 * 1024 * 1024;

/// The most a manifest or image config read whole from a layout may be (registries cap
/// manifests at 4 MiB; configs of real images are well under this).
pub const SMALL_BLOB_MAX: u64 = 16 * 1024 * 1024;

/// What a path that is not a regular file is, for an error: "a FIFO", "a symlink to /dev/zero".
fn describe(path: &Path, ft: std::fs::FileType) -> String {
    if ft.is_symlink() {
        match fs_err::read_link(path) {
            Ok(target) => format!("a symlink to {}", target.display()),
            Err(_) => "a symlink".to_string(),
        }
    } else if ft.is_fifo() {
        "a FIFO".to_string()
    } else if ft.is_char_device() {
        "a character device".to_string()
    } else if ft.is_block_device() {
        "a block device".to_string()
    } else if ft.is_socket() {
        "a socket".to_string()
    } else if ft.is_dir() {
        "a directory".to_string()
    } else {
        "not a regular file".to_string()
    }
}

fn not_regular(path: &Path, ft: std::fs::FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} is {}, not a regular file: a layout holds only regular files; replace it with the real file or mirror again",
            path.display(),
            describe(path, ft)
        ),
    )
}

/// Opens `path` for reading when it is a regular file, not through a symlink; returns the file
/// and its size when opened. The type is checked before opening (to name what the path is) and
/// again on the open file (`O_NOFOLLOW | O_NONBLOCK`), so a path swapped for a FIFO in between
/// neither blocks nor gets read.
pub fn open_regular(path: &Path) -> io::Result<(fs_err::File, u64)> {
    let meta = fs_err::symlink_metadata(path)?;
    if !meta.file_type().is_file() {
        return Err(not_regular(path, meta.file_type()));
    }
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = fs_err::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(not_regular(path, meta.file_type()));
    }
    Ok((file, meta.len()))
}

/// Reads a regular file whole, refusing one larger than `max` bytes (before reading, and while
/// reading should it grow).
pub fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let (file, size) = open_regular(path)?;
    let too_big = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is larger than {max} bytes, more than such a file may be",
                path.display()
            ),
        )
    };
    if size > max {
        return Err(too_big());
    }
    let mut out = Vec::with_capacity(size as usize);
    file.take(max.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(too_big());
    }
    Ok(out)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_to_string(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read_regular(path, max)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text", path.display()),
        )
    })
}

/// The sha256 and length of a regular file (see [`open_regular`]), streamed, read no further
/// than the size it had when opened, so a file that keeps growing is reported rather than
/// followed.
pub fn hash_regular(path: &Path) -> io::Result<(crate::oci::digest::Digest, u64)> {
    let (f, size) = crate::bounded::open_regular(path)?;
    hash_opened(&f, size, path)
}

/// [`hash_regular`] of a file [`open_regular`] opened with `size` bytes, for a caller that
/// looks at the open file (its inode, its times) before reading it.
pub fn hash_opened(
    f: &fs_err::File,
    size: u64,
    path: &Path,
) -> io::Result<(crate::oci::digest::Digest, u64)> {
    let (digest, len) = hash_reader(f.take(size + 1))?;
    if len > size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} grew past {size} bytes while being read", path.display()),
        ));
    }
    Ok((digest, len))
}

/// The sha256 of `len` bytes at `start` of a regular file (a blob inside an archive chunk);
/// a file that ends before them is an error.
pub fn hash_range(path: &Path, start: u64, len: u64) -> io::Result<crate::oci::digest::Digest> {
    use std::io::Seek;
    let (file, _) = open_regular(path)?;
    let mut file = file.into_parts().0;
    file.seek(io::SeekFrom::Start(start))?;
    let (digest, n) = hash_reader(file.take(len))?;
    if n != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "{} ends inside the bytes at {start}..{}",
                path.display(),
                start + len
            ),
        ));
    }
    Ok(digest)
}

/// The sha256 and length of everything `r` gives, read through one 1 MiB buffer: memory stays
/// the same whatever the size.
pub fn hash_reader(mut r: impl Read) -> io::Result<(crate::oci::digest::Digest, u64)> {
    let mut h = crate::oci::digest::StreamHasher::new();
    let mut buf = vec![0u8; 1024 * 1024];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a FIFO named like a blob blocked the open for ever.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = open_regular(&path).unwrap_err().to_string();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
    }

    /// Regression: a symlink to /dev/zero fed an endless read.
    #[test]
    fn a_symlink_to_dev_zero_is_refused_naming_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let e = read_regular(&path, 10).unwrap_err().to_string();
        assert!(e.contains("is a symlink to /dev/zero"), "{e}");
    }

    #[test]
    fn a_file_larger_than_its_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        fs_err::write(&path, [0u8; 11]).unwrap();
        let e = read_regular(&path, 10).unwrap_err().to_string();
        assert!(e.contains("larger than 10 bytes"), "{e}");
        assert_eq!(read_regular(&path, 11).unwrap().len(), 11);
    }
}
