//! Memory of operator catalog selection follows the selection, not the catalog (issue 31).
//!
//! A test binary of its own: it counts every allocation of the process (a counting global
//! allocator), so the peak heap of reading and selecting can be compared across catalog sizes.
//! Nothing here is timed. The generated catalog is `bootstrap_lab::bigcatalog`'s shape, scaled
//! down so a debug build reads it in seconds; the scale-up factor is the point, not the size.

use bootstrap::mirror::config::{IncludePackage, Operator};
use bootstrap::mirror::resolve::select::{select_reading, Dependencies};
use bootstrap::openshift::fbc::{Catalog, Keep, ReadStats};
use bootstrap_lab::bigcatalog::{config_files, Shape};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The heap `f` needs at its peak above what was allocated when it started.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

const HOST: &str = "registry.example.com";

/// 20 packages of 30 bundles, 2 channels, 60 skips per entry, and small bundle objects.
fn shape() -> Shape {
    Shape {
        packages: 20,
        bundles: 30,
        channels: 2,
        skips: 60,
        description_bytes: 512,
        object_bytes: 2048,
    }
}

/// An entry listing the 5 packages `operator-0003`, `-0006`, ... `-0015` (heads only).
fn five_packages(shape: &Shape) -> Operator {
    let mut op = Operator {
        catalog: format!("{HOST}/bench/catalog:v1"),
        ..Default::default()
    };
    op.packages = (1..=5)
        .map(|i| IncludePackage {
            name: shape.package(i * 3),
            ..Default::default()
        })
        .collect();
    op
}

/// Selects `op` from `files` through [`select_reading`]; returns each read's statistics.
fn select(files: &BTreeMap<String, Vec<u8>>, op: &Operator) -> (usize, Vec<ReadStats>) {
    let mut reads = Vec::new();
    let mut read = |keep: Keep<'_>| {
        let (c, stats) = Catalog::read(files.iter().map(|(n, b)| (n.as_str(), &b[..])), keep)?;
        reads.push(stats);
        Ok(c)
    };
    let sel = select_reading(&mut read, op, 0, Dependencies::Report).unwrap();
    let kept = sel.bundles.values().map(|b| b.len()).sum();
    (kept, reads)
}

#[test]
fn five_packages_from_a_catalog_four_times_larger_keep_the_same_documents() {
    let small = shape();
    let large = small.scaled(4);
    let op = five_packages(&small);
    let (kept_small, reads_small) = select(&config_files(&small, HOST, &BTreeMap::new()), &op);
    let (kept_large, reads_large) = select(&config_files(&large, HOST, &BTreeMap::new()), &op);
    // Heads of two channels: one bundle per package.
    assert_eq!((kept_small, kept_large), (5, 5));
    assert_eq!(reads_small.len(), 1, "one read for listed packages");
    assert_eq!(reads_large.len(), 1);
    let (s, l) = (reads_small[0], reads_large[0]);
    assert_eq!(l.documents, 4 * s.documents, "every document is read");
    // The listed packages whole (package, channels, bundles), at either size.
    let per_package = 1 + small.channels + small.bundles;
    assert_eq!((s.whole, l.whole), (5 * per_package, 5 * per_package));
    // Of the other packages: their package documents as an index and their bundles' versions;
    // no channel, no entry, no skip.
    assert_eq!(l.indexed, large.packages - 5);
    assert_eq!((l.indexed_entries, l.indexed_skips), (0, 0));
    assert_eq!(l.versions, (large.packages - 5) * large.bundles);
}

#[test]
fn five_packages_from_a_catalog_four_times_larger_cost_under_1_2x_the_heap() {
    let small = shape();
    let large = small.scaled(4);
    let op = five_packages(&small);
    let files_small = config_files(&small, HOST, &BTreeMap::new());
    let files_large = config_files(&large, HOST, &BTreeMap::new());
    let (_, heap_small) = peak_of(|| select(&files_small, &op));
    let (_, heap_large) = peak_of(|| select(&files_large, &op));
    assert!(
        (heap_large as f64) < 1.2 * heap_small as f64,
        "peak heap {heap_large} B for the 4x catalog against {heap_small} B"
    );
    // The measure can tell: reading the whole catalog grows with it.
    let all = |files: &BTreeMap<String, Vec<u8>>| {
        Catalog::read(files.iter().map(|(n, b)| (n.as_str(), &b[..])), Keep::All).unwrap()
    };
    let (_, whole_small) = peak_of(|| all(&files_small));
    let (_, whole_large) = peak_of(|| all(&files_large));
    assert!(
        whole_large as f64 > 3.0 * whole_small as f64,
        "the whole catalog: {whole_large} B against {whole_small} B"
    );
    assert!(
        heap_small * 2 < whole_small,
        "{heap_small} B against {whole_small} B whole"
    );
}
