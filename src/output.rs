//! Everything a command shows: results to stdout (text or `--output json`), progress and logs to
//! stderr. On a terminal progress is drawn with indicatif bars (overall bytes, a line per large
//! blob in flight); otherwise it is plain lines, a few per minute, that read well in CI logs.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fmt::Display;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum OutputFormat {
    /// Human-readable text.
    #[default]
    Text,
    /// One JSON document on stdout.
    Json,
}

/// The one way a command shows its result: text for people or one JSON document for machines,
/// on stdout; and its warnings and errors, on stderr. Commands build a result value that is both
/// `Serialize` and `Display` and hand it here, so `--output json` is never an afterthought.
#[derive(Clone, Copy, Debug)]
pub struct Printer {
    format: OutputFormat,
}

impl Printer {
    /// A printer for `format`.
    pub fn new(format: OutputFormat) -> Self {
        Printer { format }
    }

    /// The format results are printed in.
    pub fn format(&self) -> OutputFormat {
        self.format
    }

    /// Prints a command's result on stdout: its `Display` as text, or its `Serialize` as one
    /// pretty JSON document. A closed pipe (`| head`) is not an error.
    pub fn result<T: serde::Serialize + Display>(&self, value: &T) -> anyhow::Result<()> {
        let text = match self.format {
            OutputFormat::Json => {
                let mut json = serde_json::to_string_pretty(value)?;
                json.push('\n');
                json
            }
            OutputFormat::Text => value.to_string(),
        };
        let mut out = std::io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(anyhow::Error::new(e).context("writing the result to stdout"))
            }
            _ => Ok(()),
        }
    }

    /// A warning on stderr: `warning: ...`.
    pub fn warn(&self, message: impl Display) {
        eprintln!("warning: {message}");
    }

    /// An error line on stderr: `error: ...` (the command still decides the exit code).
    pub fn error(&self, message: impl Display) {
        eprintln!("error: {message}");
    }

    /// Free text on stderr (tables, notes) that is not the command's result.
    pub fn note(&self, text: impl Display) {
        eprint!("{text}");
    }
}

/// Blobs at least this large get their own progress line.
pub const LARGE_BLOB: u64 = 64 * 1024 * 1024;

/// Byte counts as people read them.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Reads a size as people write it: bytes (`1048576`), or a number with a binary unit
/// (`K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB`, `P`/`PiB`) or a decimal one (`KB`, `MB`, `GB`,
/// `TB`, `PB`); case and a space before the unit do not matter. The inverse of
/// [`human_bytes`] for whole numbers.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: u64 = number.parse().map_err(|_| {
        format!("'{text}' is not a size: write a whole number with an optional unit, e.g. 512GiB")
    })?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "p" | "pib" => 1 << 50,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "pb" => 1_000_000_000_000_000,
        other => {
            return Err(format!(
                "'{text}': unknown unit '{other}' (use B, KiB, MiB, GiB, TiB, PiB or KB, MB, GB, TB, PB)"
            ))
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("'{text}' is larger than 16 EiB"))
}

/// A duration as engineers write it: a whole number with `s`, `m` or `h` (`90m`, `2h`, `30s`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; write e.g. 90m, 2h or 30s"))?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => None,
    }
    .ok_or_else(|| format!("{s:?} is not a duration; write e.g. 90m, 2h or 30s"))?;
    if secs == 0 {
        return Err(format!(
            "{s:?}: a limit of zero would fail at once; give e.g. 90m"
        ));
    }
    Ok(std::time::Duration::from_secs(secs))
}

/// A short duration: `300ms`, or what [`parse_duration`] reads.
pub fn parse_duration_ms(s: &str) -> Result<std::time::Duration, String> {
    match s.trim().strip_suffix("ms") {
        Some(n) => n
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .map(std::time::Duration::from_millis)
            .ok_or_else(|| format!("{s:?} is not a duration; write e.g. 300ms, 3s or 1m")),
        None => parse_duration(s),
    }
}

/// A duration as [`parse_duration_ms`] reads it back: the largest whole unit (`2h`, `90m`,
/// `30s`, `300ms`).
pub fn human_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    match ms {
        _ if !ms.is_multiple_of(1000) => format!("{ms}ms"),
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        _ => format!("{}s", ms / 1000),
    }
}

/// Progress of one long operation.
#[derive(Clone)]
pub struct Progress {
    inner: Arc<Inner>,
}

struct Inner {
    bars: Option<(MultiProgress, ProgressBar)>,
    total: AtomicU64,
    done: AtomicU64,
    last_line: Mutex<Instant>,
    label: String,
}

/// A large blob's own bar; finishes (and disappears) on drop.
pub struct BlobProgress {
    bar: Option<ProgressBar>,
}

impl BlobProgress {
    /// Counts bytes on this blob's bar.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }
}

impl Drop for BlobProgress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("label", &self.inner.label)
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// Progress over `total` bytes; bars only when stderr is a terminal.
    pub fn new(label: &str, total: u64) -> Self {
        let bars = std::io::stderr().is_terminal().then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let bar = multi.add(ProgressBar::new(total));
            bar.set_style(
                ProgressStyle::with_template(
                    "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            bar.set_message(label.to_string());
            bar.enable_steady_tick(Duration::from_millis(200));
            (multi, bar)
        });
        Progress {
            inner: Arc::new(Inner {
                bars,
                total: AtomicU64::new(total),
                done: AtomicU64::new(0),
                last_line: Mutex::new(Instant::now()),
                label: label.to_string(),
            }),
        }
    }

    /// Progress of steps rather than bytes (the install pipeline's stages): lines only, no
    /// bar, on a terminal too.
    pub fn lines(label: &str) -> Self {
        Progress {
            inner: Arc::new(Inner {
                bars: None,
                total: AtomicU64::new(0),
                done: AtomicU64::new(0),
                last_line: Mutex::new(Instant::now()),
                label: label.to_string(),
            }),
        }
    }

    /// Sets the bytes the whole operation moves, once it is known.
    pub fn set_total(&self, total: u64) {
        self.inner.total.store(total, Ordering::Relaxed);
        if let Some((_, bar)) = &self.inner.bars {
            bar.set_length(total);
        }
    }

    /// Bytes counted so far.
    pub fn done(&self) -> u64 {
        self.inner.done.load(Ordering::Relaxed)
    }

    /// Counts transferred bytes.
    pub fn inc(&self, n: u64) {
        let done = self.inner.done.fetch_add(n, Ordering::Relaxed) + n;
        match &self.inner.bars {
            Some((_, bar)) => bar.inc(n),
            None => {
                let total = self.inner.total.load(Ordering::Relaxed);
                let mut last = self.inner.last_line.lock().expect("progress lock");
                if last.elapsed() >= Duration::from_secs(10) {
                    *last = Instant::now();
                    eprintln!(
                        "{}: {} of {} ({}%)",
                        self.inner.label,
                        human_bytes(done),
                        human_bytes(total),
                        done * 100 / total.max(1)
                    );
                }
            }
        }
    }

    /// A line of its own for a large blob.
    pub fn blob(&self, name: &str, size: u64) -> BlobProgress {
        if size < LARGE_BLOB {
            return BlobProgress { bar: None };
        }
        match &self.inner.bars {
            Some((multi, _)) => {
                let bar = multi.add(ProgressBar::new(size));
                bar.set_style(
                    ProgressStyle::with_template("  {msg} [{bar:30}] {bytes}/{total_bytes}")
                        .expect("static template")
                        .progress_chars("=> "),
                );
                bar.set_message(name.to_string());
                BlobProgress { bar: Some(bar) }
            }
            None => {
                eprintln!("{}: {name} ({})", self.inner.label, human_bytes(size));
                BlobProgress { bar: None }
            }
        }
    }

    /// A warning (`warning: ...`) that does not tear the bars.
    pub fn warn(&self, message: impl Display) {
        self.println(&format!("warning: {message}"));
    }

    /// An error line (`error: ...`) that does not tear the bars; the run goes on or fails as
    /// its caller decides.
    pub fn error(&self, message: impl Display) {
        self.println(&format!("error: {message}"));
    }

    /// A log line that does not tear the bars.
    pub fn println(&self, line: &str) {
        match &self.inner.bars {
            Some((multi, _)) => {
                let _ = multi.println(line);
            }
            None => eprintln!("{line}"),
        }
    }

    /// Removes the bars.
    pub fn finish(&self) {
        if let Some((_, bar)) = &self.inner.bars {
            bar.finish_and_clear();
        }
    }
}

/// One live line per node, for the install stages that work on every node at once (boot, wait,
/// prep): on a terminal each node has a line that changes in place (a node not named at the
/// start gets its line when it first appears); otherwise a plain line `LABEL: NODE: message` is
/// printed whenever a node's message changes (never the same twice in a row), so a CI log reads
/// as a history.
#[derive(Clone)]
pub struct NodeLines {
    inner: Arc<NodeLinesInner>,
}

struct NodeLinesInner {
    label: String,
    width: usize,
    multi: Option<MultiProgress>,
    bars: Mutex<std::collections::BTreeMap<String, ProgressBar>>,
    last: Mutex<std::collections::BTreeMap<String, String>>,
}

impl NodeLines {
    /// A line for each of `nodes`, in order; live lines only when stderr is a terminal.
    pub fn new(label: &str, nodes: &[String]) -> Self {
        let multi = std::io::stderr()
            .is_terminal()
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        let lines = NodeLines {
            inner: Arc::new(NodeLinesInner {
                label: label.to_string(),
                width: nodes.iter().map(String::len).max().unwrap_or(0),
                multi,
                bars: Mutex::new(Default::default()),
                last: Mutex::new(Default::default()),
            }),
        };
        for n in nodes {
            lines.bar(n);
        }
        lines
    }

    /// `node`'s live line (made on first use); `None` off a terminal.
    fn bar(&self, node: &str) -> Option<ProgressBar> {
        let multi = self.inner.multi.as_ref()?;
        let mut bars = self.inner.bars.lock().expect("node lines lock");
        let bar = bars.entry(node.to_string()).or_insert_with(|| {
            let bar = multi.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix} {msg}").expect("static template"),
            );
            bar.set_prefix(format!(
                "{} {node:w$}",
                self.inner.label,
                w = self.inner.width
            ));
            bar.set_message("waiting");
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Some(bar.clone())
    }

    /// Sets `node`'s line to `message`.
    pub fn set(&self, node: &str, message: impl Display) {
        let message = message.to_string();
        {
            let mut last = self.inner.last.lock().expect("node lines lock");
            if last.get(node) == Some(&message) {
                return;
            }
            last.insert(node.to_string(), message.clone());
        }
        match self.bar(node) {
            Some(bar) => bar.set_message(message),
            None => eprintln!("{}: {node}: {message}", self.inner.label),
        }
    }

    /// The last message set for `node`.
    pub fn get(&self, node: &str) -> Option<String> {
        let last = self.inner.last.lock().expect("node lines lock");
        last.get(node).cloned()
    }

    /// A line above the nodes' lines (an event, a warning) that does not tear them.
    pub fn println(&self, line: &str) {
        match &self.inner.multi {
            Some(multi) => {
                let _ = multi.println(line);
            }
            None => eprintln!("{line}"),
        }
    }

    /// Stops the spinners, leaving each node's last line on screen.
    pub fn finish(&self) {
        let bars = self.inner.bars.lock().expect("node lines lock");
        for bar in bars.values() {
            bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations print as they are written, and read back the same.
    #[test]
    fn durations_print_in_their_largest_whole_unit() {
        for text in ["2h", "90m", "30s", "300ms", "61s"] {
            let d = parse_duration_ms(text).expect("a duration");
            assert_eq!(human_duration(d), text);
        }
    }

    /// Sizes read as people write them, and refused with the reason when they are not sizes.
    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("512GiB"), Ok(512 << 30));
        assert_eq!(parse_bytes("1 TiB"), Ok(1 << 40));
        assert_eq!(parse_bytes("2t"), Ok(2 << 40));
        assert_eq!(parse_bytes("5GB"), Ok(5_000_000_000));
        assert!(parse_bytes("-1GiB").unwrap_err().contains("not a size"));
        assert!(parse_bytes("1.5GiB").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("20000PiB").unwrap_err().contains("larger than"));
    }
}
