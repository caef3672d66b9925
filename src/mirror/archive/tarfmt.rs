//! The tar side of a chunk: one 512-byte ustar header per file (a size past 8 GiB in the
//! base-256 form GNU tar, bsdtar and Go read), the data padded to 512 bytes, two zero blocks
//! at the end; and the placement of files into chunks before anything is written.

use anyhow::{bail, Context, Result};

/// A tar block.
pub const BLOCK: u64 = 512;
/// The end of a tar stream: two zero blocks.
pub const END: u64 = 2 * BLOCK;

/// `size` rounded up to whole blocks.
pub fn padded(size: u64) -> u64 {
    size.div_ceil(BLOCK) * BLOCK
}

/// The header of a regular file `path` of `size` bytes. Mode 0644, owner 0, time 0: a chunk's
/// bytes depend on its content alone.
pub fn header(path: &str, size: u64) -> Result<[u8; 512]> {
    let mut h = tar::Header::new_ustar();
    h.set_path(path)
        .with_context(|| format!("{path}: cannot be named in a tar header"))?;
    h.set_size(size);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    Ok(*h.as_bytes())
}

/// Reads a header back: the path and size it names, after checking its checksum.
pub fn read_header(block: &[u8; 512]) -> Result<(String, u64)> {
    let h = tar::Header::from_byte_slice(block);
    let stored = h.cksum().context("unreadable header checksum")?;
    let sum: u32 = block
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if (148..156).contains(&i) {
                32
            } else {
                *b as u32
            }
        })
        .sum();
    if stored != sum {
        bail!("the tar header's checksum does not match");
    }
    let path = h.path().context("unreadable path")?;
    let size = h.entry_size().context("unreadable size")?;
    Ok((path.to_string_lossy().into_owned(), size))
}

/// Where one file goes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Slot {
    /// Chunk number, 1-based.
    pub chunk: usize,
    /// Where its data starts (its header is the block before).
    pub offset: u64,
    /// Its size.
    pub size: u64,
}

/// Places files, in the order given, into chunks of at most `limit` bytes: a file goes into
/// the current chunk when it fits, else starts the next one; a file larger than `limit` goes
/// alone. Chunks are numbered from `first`. Returns each file's slot and every chunk's size.
pub fn place(sizes: &[u64], limit: u64, first: usize) -> Result<(Vec<Slot>, Vec<u64>)> {
    let too_large =
        |size: u64| anyhow::anyhow!("a file of {size} bytes cannot be placed in a tar chunk");
    let mut slots = Vec::with_capacity(sizes.len());
    let mut chunks: Vec<u64> = Vec::new();
    let mut used = 0u64; // bytes of the current chunk before its end blocks
    for &size in sizes {
        let entry = size
            .checked_add(BLOCK - 1)
            .map(|s| s / BLOCK * BLOCK)
            .and_then(|p| p.checked_add(BLOCK))
            .ok_or_else(|| too_large(size))?;
        let needed = used
            .checked_add(entry)
            .and_then(|n| n.checked_add(END))
            .ok_or_else(|| too_large(size))?;
        if chunks.is_empty() || (used > 0 && needed > limit) {
            if let Some(last) = chunks.last_mut() {
                *last = used + END;
            }
            chunks.push(0);
            used = 0;
        }
        slots.push(Slot {
            chunk: first + chunks.len() - 1,
            offset: used + BLOCK,
            size,
        });
        used = used.checked_add(entry).ok_or_else(|| too_large(size))?;
    }
    if let Some(last) = chunks.last_mut() {
        *last = used.checked_add(END).ok_or_else(|| too_large(used))?;
    }
    Ok((slots, chunks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_keeps_chunks_within_the_limit() {
        let limit = 10 * BLOCK;
        // 3 blocks each with header: 2 fit (6) + end (2) = 8 <= 10; a third would make 11.
        let (slots, chunks) = place(&[1000, 1000, 1000, 20 * BLOCK, 10], limit, 1).unwrap();
        assert_eq!(
            slots[0],
            Slot {
                chunk: 1,
                offset: 512,
                size: 1000
            }
        );
        assert_eq!(
            slots[1],
            Slot {
                chunk: 1,
                offset: 512 * 4,
                size: 1000
            }
        );
        assert_eq!(slots[2].chunk, 2);
        assert_eq!(slots[3].chunk, 3, "a file larger than the limit goes alone");
        assert_eq!(slots[4].chunk, 4);
        assert_eq!(chunks, vec![8 * BLOCK, 5 * BLOCK, 23 * BLOCK, 4 * BLOCK]);
        for (i, c) in chunks.iter().enumerate() {
            let alone = slots.iter().filter(|s| s.chunk == i + 1).count() == 1;
            assert!(*c <= limit || alone);
        }
    }

    #[test]
    fn sizes_that_cannot_be_placed_are_refused() {
        assert!(place(&[u64::MAX - 10], 4096, 1).is_err());
        assert!(place(&[u64::MAX / 2, u64::MAX / 2], u64::MAX, 1).is_err());
    }

    #[test]
    fn headers_round_trip_and_large_sizes() {
        let name = format!("blobs/sha256/{}", "a".repeat(64));
        let h = header(&name, 9 * 1024 * 1024 * 1024).unwrap();
        assert_eq!(read_header(&h).unwrap(), (name, 9 * 1024 * 1024 * 1024));
        let mut bad = h;
        bad[0] ^= 1;
        assert!(read_header(&bad).is_err());
    }
}
