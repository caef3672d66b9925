//! A stage's log, `RUN/logs/STAGE.log`: appended to on every attempt, each line stamped, and
//! every secret the stage may meet replaced by `<redacted>` before it reaches the file (the
//! messages are ours and should never quote one; this is the second line of defence).

use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// An open stage log.
pub struct StageLog {
    file: fs_err::File,
    path: PathBuf,
    secrets: Vec<String>,
}

impl StageLog {
    /// Opens (appending) `path`, creating its folder; `secrets` are redacted from every line.
    pub fn open(path: &Path, secrets: Vec<String>) -> Result<Self> {
        if let Some(dir) = path.parent() {
            fs_err::create_dir_all(dir)?;
        }
        let file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening the log {}", path.display()))?;
        Ok(StageLog {
            file,
            path: path.to_path_buf(),
            secrets,
        })
    }

    /// Appends `text` (one or more lines), each line stamped with the time, secrets redacted.
    pub fn line(&mut self, text: &str) -> Result<()> {
        let now = super::state::now();
        let text = self.redact(text);
        let mut out = String::new();
        for l in text.lines() {
            out.push_str(&format!("{now} {l}\n"));
        }
        self.file
            .write_all(out.as_bytes())
            .and_then(|()| self.file.flush())
            .with_context(|| format!("writing the log {}", self.path.display()))
    }

    /// `text` with every secret this log knows replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        redact(text, &self.secrets)
    }
}

/// `text` with each of `secrets` (longest first) replaced by `<redacted>`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(s.as_str(), "<redacted>");
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn redaction_replaces_every_occurrence() {
        let s = vec!["hunter2-secret".to_string()];
        assert_eq!(
            super::redact("a hunter2-secret b hunter2-secret", &s),
            "a <redacted> b <redacted>"
        );
    }
}
