//! SSH signatures (OpenSSH's PROTOCOL.sshsig) over what the mirror writes for auditors: a file
//! is signed into `FILE.sig` exactly as `ssh-keygen -Y sign -n bootstrap-mirror` signs it
//! (sha512, armored), and checked against an `allowed_signers` file exactly as `ssh-keygen -Y
//! verify` checks it, so an auditor at the door needs OpenSSH and nothing else (docs/audit.md).
//!
//! The RustCrypto `ssh-key` crate (through russh's re-export, so the two share one version)
//! makes and checks the signatures. Private keys are read from OpenSSH files; an encrypted key is
//! refused with the command that decrypts a copy (no passphrase prompt here, no agent yet).

use anyhow::{anyhow, bail, Context, Result};
use russh::keys::ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};
use std::path::{Path, PathBuf};

/// The signature namespace of everything bootstrap signs for the mirror (ssh-keygen's `-n`).
pub const NAMESPACE: &str = "bootstrap-mirror";

/// What signing wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// `FILE.sig`.
    pub signature: PathBuf,
    /// The signer's `allowed_signers` line (`IDENTITY namespaces="bootstrap-mirror" KEY`).
    pub allowed_signers: String,
    /// The signing key's SHA256 fingerprint.
    pub fingerprint: String,
}

/// Who signed, once a signature checked out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The allowed_signers principal whose key made the signature.
    pub identity: String,
    /// The key's SHA256 fingerprint.
    pub fingerprint: String,
}

/// Reads an OpenSSH private key, naming the file in every error.
pub fn read_key(path: &Path) -> Result<PrivateKey> {
    let key = PrivateKey::read_openssh_file(path).map_err(|e| {
        anyhow!(
            "{}: not an OpenSSH private key ({e}); make one with ssh-keygen -t ed25519 -f {}",
            path.display(),
            path.display()
        )
    })?;
    if key.is_encrypted() {
        bail!(
            "{}: the key is encrypted; sign with a decrypted copy (cp KEY KEY.plain && ssh-keygen -p -N '' -f KEY.plain) kept on the signing machine only",
            path.display()
        );
    }
    Ok(key)
}

/// The armored signature of `message` by `key` (sha512, [`NAMESPACE`]).
pub fn sign(key: &PrivateKey, message: &[u8]) -> Result<String> {
    let sig = key
        .sign(NAMESPACE, HashAlg::Sha512, message)
        .map_err(|e| anyhow!("signing: {e}"))?;
    sig.to_pem(LineEnding::LF)
        .map_err(|e| anyhow!("encoding the signature: {e}"))
}

/// The `allowed_signers` line for `key` as `identity`.
pub fn allowed_signers_line(identity: &str, key: &PublicKey) -> Result<String> {
    let mut public = key.clone();
    public.set_comment("");
    let text = public
        .to_openssh()
        .map_err(|e| anyhow!("encoding the public key: {e}"))?;
    Ok(format!(
        "{identity} namespaces=\"{NAMESPACE}\" {}",
        text.trim()
    ))
}

/// Signs `file` with the key at `key_file` into `FILE.sig` (written whole or not at all); the
/// identity of the allowed_signers line is the key's comment, or `bootstrap` without one.
pub fn sign_file(key_file: &Path, file: &Path) -> Result<Signed> {
    let key = read_key(key_file)?;
    let message = fs_err::read(file)?;
    let armored = sign(&key, &message)?;
    let signature = sig_path(file);
    crate::fs::write_atomic(&signature, armored.as_bytes())
        .with_context(|| format!("writing {}", signature.display()))?;
    // A comment that would read as a pattern, a list or a comment in allowed_signers is not an
    // identity.
    let identity = match key.comment().as_str_lossy() {
        c if c.trim().is_empty()
            || c.starts_with('#')
            || c.contains(|ch: char| ch.is_whitespace() || ",*?!\"".contains(ch)) =>
        {
            "bootstrap".to_string()
        }
        c => c.to_string(),
    };
    Ok(Signed {
        signature,
        allowed_signers: allowed_signers_line(&identity, key.public_key())?,
        fingerprint: key.fingerprint(HashAlg::Sha256).to_string(),
    })
}

/// `FILE.sig`.
pub fn sig_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// One usable line of an allowed_signers file: its principals and key, when the line's
/// `namespaces` option (if any) admits [`NAMESPACE`].
struct Signer {
    principals: String,
    key: PublicKey,
}

/// The signers of an allowed_signers file's text that may sign in [`NAMESPACE`] now. As
/// `ssh-keygen -Y verify` reads the file: comments and blank lines skipped; the key may follow
/// the principals directly or after options; option names are case-insensitive; a line with an
/// option we do not know, a malformed option or key, or `cert-authority` (certificates are not
/// taken here) is skipped (logged), as is a line whose `valid-after`/`valid-before` window does
/// not hold the present time or whose `namespaces` patterns leave ours out.
fn signers(source: &str, text: &str) -> Vec<Signer> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match signer_line(line) {
            Ok(Some(s)) => out.push(s),
            Ok(None) => {}
            Err(why) => tracing::warn!("{source}:{}: line skipped: {why}", i + 1),
        }
    }
    out
}

/// One allowed_signers line: the signer when it may sign in [`NAMESPACE`] now.
fn signer_line(line: &str) -> Result<Option<Signer>, String> {
    let (principals, rest) = split_field(line).ok_or("want PRINCIPALS [OPTIONS] KEYTYPE KEY")?;
    let rest = rest.trim_start();
    let (options, key_text) = match PublicKey::from_openssh(rest) {
        Ok(_) => ("", rest),
        Err(_) => split_field(rest).ok_or("no key after the options")?,
    };
    let key =
        PublicKey::from_openssh(key_text.trim()).map_err(|e| format!("not a public key: {e}"))?;
    let mut namespaces: Option<String> = None;
    let now = time::OffsetDateTime::now_utc();
    for opt in split_options(options)? {
        let (name, value) = match opt.split_once('=') {
            Some((n, v)) => (n.to_ascii_lowercase(), Some(unquote(v)?)),
            None => (opt.to_ascii_lowercase(), None),
        };
        match (name.as_str(), value) {
            ("cert-authority", None) => {
                return Err("cert-authority: certificates are not taken".into())
            }
            ("namespaces", Some(v)) => namespaces = Some(v),
            ("valid-after", Some(v)) => {
                if now < timestamp(&v)? {
                    return Ok(None);
                }
            }
            ("valid-before", Some(v)) => {
                if now > timestamp(&v)? {
                    return Ok(None);
                }
            }
            (n, _) => return Err(format!("unknown or malformed option {n:?}")),
        }
    }
    let admitted = namespaces
        .as_deref()
        .is_none_or(|list| list.split(',').any(|p| pattern_match(p.trim(), NAMESPACE)));
    Ok(admitted.then(|| Signer {
        principals: principals.to_string(),
        key,
    }))
}

/// The first field of `s` (a quoted one may hold spaces) and the rest.
fn split_field(s: &str) -> Option<(&str, &str)> {
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return Some((&s[..i], &s[i..])),
            _ => {}
        }
    }
    None
}

/// Comma-separated options, commas inside quotes kept.
fn split_options(s: &str) -> Result<Vec<&str>, String> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let (mut out, mut start, mut quoted) = (Vec::new(), 0, false);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if quoted {
        return Err("unterminated quote in the options".into());
    }
    out.push(&s[start..]);
    Ok(out)
}

/// An option value, which OpenSSH wants quoted.
fn unquote(v: &str) -> Result<String, String> {
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .map(str::to_string)
        .ok_or_else(|| format!("option value {v:?} is not quoted"))
}

/// `YYYYMMDD[HHMM[SS]][Z]` (read as UTC; OpenSSH reads it as local time without the Z).
fn timestamp(v: &str) -> Result<time::OffsetDateTime, String> {
    let digits = v.trim_end_matches(['Z', 'z']);
    let bad = || format!("{v:?} is not YYYYMMDD[HHMM[SS]][Z]");
    if !digits.bytes().all(|b| b.is_ascii_digit()) || ![8, 12, 14].contains(&digits.len()) {
        return Err(bad());
    }
    let n = |a: usize, b: usize| {
        digits
            .get(a..b)
            .map_or(Ok(0), |t| t.parse::<u32>().map_err(|_| bad()))
    };
    let month = time::Month::try_from(n(4, 6)? as u8).map_err(|_| bad())?;
    let date = time::Date::from_calendar_date(n(0, 4)? as i32, month, n(6, 8)? as u8)
        .map_err(|_| bad())?;
    let t = time::Time::from_hms(n(8, 10)? as u8, n(10, 12)? as u8, n(12, 14)? as u8)
        .map_err(|_| bad())?;
    Ok(time::PrimitiveDateTime::new(date, t).assume_utc())
}

/// OpenSSH's `match_pattern`: `*` any run, `?` one character; a leading `!` negates (a negated
/// pattern never admits by itself).
fn pattern_match(pattern: &str, s: &str) -> bool {
    if pattern.starts_with('!') {
        return false;
    }
    fn m(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => m(&p[1..], s) || (!s.is_empty() && m(p, &s[1..])),
            (Some(b'?'), Some(_)) => m(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => m(&p[1..], &s[1..]),
            _ => false,
        }
    }
    m(pattern.as_bytes(), s.as_bytes())
}

/// Checks the armored `signature` of `message` against the allowed_signers text (`source` names
/// it in errors): the signature is in [`NAMESPACE`], made by a key the file lists for that
/// namespace, and valid for these bytes.
pub fn verify(source: &str, allowed: &str, message: &[u8], signature: &str) -> Result<Verified> {
    let sig = SshSig::from_pem(signature.trim().as_bytes())
        .map_err(|e| anyhow!("not an SSH signature: {e}"))?;
    if sig.namespace() != NAMESPACE {
        bail!(
            "the signature is in namespace {:?}, not {NAMESPACE:?}",
            sig.namespace()
        );
    }
    let signer_key = PublicKey::from(sig.public_key().clone());
    let fingerprint = signer_key.fingerprint(HashAlg::Sha256).to_string();
    let listed = signers(source, allowed);
    let signer = listed
        .iter()
        .find(|s| s.key.key_data() == sig.public_key())
        .ok_or_else(|| {
            anyhow!(
                "signed by {fingerprint}, a key {source} does not list for namespace {NAMESPACE}"
            )
        })?;
    signer
        .key
        .verify(NAMESPACE, message, &sig)
        .map_err(|e| anyhow!("the signature by {fingerprint} does not match the file ({e})"))?;
    Ok(Verified {
        identity: signer.principals.clone(),
        fingerprint,
    })
}

/// [`verify`] of `file` with `FILE.sig` beside it, against the allowed_signers file.
pub fn verify_file(allowed_signers: &Path, file: &Path) -> Result<Verified> {
    let message = fs_err::read(file)?;
    verify_bytes(allowed_signers, file, &message)
}

/// [`verify`] of `message` (the bytes read from `file`, so that what is checked afterwards is
/// exactly what was signed) with `FILE.sig`, against the allowed_signers file.
pub fn verify_bytes(allowed_signers: &Path, file: &Path, message: &[u8]) -> Result<Verified> {
    let allowed = fs_err::read_to_string(allowed_signers)?;
    let sig_file = sig_path(file);
    let signature = fs_err::read_to_string(&sig_file).map_err(|e| {
        anyhow!(
            "{}: {}: the file is not signed (sign it with --sign-key)",
            sig_file.display(),
            crate::yaml::io_reason(&e)
        )
    })?;
    verify(
        &allowed_signers.display().to_string(),
        &allowed,
        message,
        &signature,
    )
    .with_context(|| format!("{}", sig_file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn keygen(dir: &Path, name: &str) -> PathBuf {
        let key = dir.join(name);
        let st = Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "release-engineer@example.com",
                "-f",
            ])
            .arg(&key)
            .status()
            .unwrap();
        assert!(st.success());
        key
    }

    /// What bootstrap signs, OpenSSH verifies; what OpenSSH signs, bootstrap verifies; a
    /// flipped byte, another namespace and an unlisted key are refused.
    #[test]
    fn signatures_are_interchangeable_with_ssh_keygen() {
        let dir = tempfile::tempdir().unwrap();
        let key = keygen(dir.path(), "signer");
        let file = dir.path().join("manifest.json");
        fs_err::write(&file, b"{\"images\": 3}\n").unwrap();
        let signed = sign_file(&key, &file).unwrap();
        assert!(signed.allowed_signers.starts_with(
            "release-engineer@example.com namespaces=\"bootstrap-mirror\" ssh-ed25519 "
        ));
        let allowed = dir.path().join("allowed_signers");
        fs_err::write(&allowed, format!("{}\n", signed.allowed_signers)).unwrap();
        let o = Command::new("ssh-keygen")
            .args(["-Y", "verify", "-f"])
            .arg(&allowed)
            .args(["-I", "release-engineer@example.com", "-n", NAMESPACE, "-s"])
            .arg(&signed.signature)
            .stdin(fs_err::File::open(&file).unwrap().into_file())
            .output()
            .unwrap();
        assert!(o.status.success(), "ssh-keygen -Y verify: {o:?}");
        let v = verify_file(&allowed, &file).unwrap();
        assert_eq!(v.identity, "release-engineer@example.com");
        assert_eq!(v.fingerprint, signed.fingerprint);

        // Signed by OpenSSH, checked by us.
        let other = dir.path().join("record.json");
        fs_err::write(&other, b"{}\n").unwrap();
        let st = Command::new("ssh-keygen")
            .args(["-q", "-Y", "sign", "-n", NAMESPACE, "-f"])
            .arg(&key)
            .arg(&other)
            .status()
            .unwrap();
        assert!(st.success());
        verify_file(&allowed, &other).unwrap();

        // A flipped byte.
        fs_err::write(&file, b"{\"images\": 4}\n").unwrap();
        let e = format!("{:#}", verify_file(&allowed, &file).unwrap_err());
        assert!(e.contains("does not match the file"), "{e}");

        // Another namespace.
        fs_err::remove_file(sig_path(&file)).unwrap();
        let st = Command::new("ssh-keygen")
            .args(["-q", "-Y", "sign", "-n", "file", "-f"])
            .arg(&key)
            .arg(&file)
            .status();
        assert!(st.unwrap().success());
        let e = format!("{:#}", verify_file(&allowed, &file).unwrap_err());
        assert!(e.contains("namespace \"file\""), "{e}");

        // A key the allowed_signers file does not list.
        let stranger = keygen(dir.path(), "stranger");
        fs_err::remove_file(sig_path(&other)).unwrap();
        sign_file(&stranger, &other).unwrap();
        let e = format!("{:#}", verify_file(&allowed, &other).unwrap_err());
        assert!(e.contains("does not list"), "{e}");
    }

    /// A line whose namespaces option leaves ours out does not admit the key.
    #[test]
    fn allowed_signers_namespaces_are_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let key = read_key(&keygen(dir.path(), "k")).unwrap();
        let sig = sign(&key, b"x").unwrap();
        let line = allowed_signers_line("a@b", key.public_key()).unwrap();
        assert!(verify("allowed", &line, b"x", &sig).is_ok());
        let git_only = line.replace("bootstrap-mirror", "git");
        let e = format!(
            "{:#}",
            verify("allowed", &git_only, b"x", &sig).unwrap_err()
        );
        assert!(e.contains("does not list"), "{e}");
        let key_text = line
            .split_once(" namespaces=\"bootstrap-mirror\" ")
            .unwrap()
            .1;
        let ok = |l: &str| verify("allowed", l, b"x", &sig).is_ok();
        // As ssh-keygen reads them: option names in any case, wildcards, the key right after
        // the principals, a broken line skipped rather than fatal.
        assert!(ok(&format!(
            "a@b NAMESPACES=\"git,bootstrap-*\" {key_text}"
        )));
        assert!(ok(&format!("a@b {key_text}")));
        assert!(ok(&format!("a@b ssh-ed25519 AAAAnope\na@b {key_text}")));
        assert!(ok(&format!(
            "a@b valid-after=\"20200101\",valid-before=\"29991231Z\" {key_text}"
        )));
        // Refused: expired, not yet valid, a CA line, an unknown or unquoted option, a negation.
        assert!(!ok(&format!("a@b valid-before=\"20200101\" {key_text}")));
        assert!(!ok(&format!("a@b valid-after=\"29990101\" {key_text}")));
        assert!(!ok(&format!("a@b cert-authority {key_text}")));
        assert!(!ok(&format!("a@b namespace=\"git\" {key_text}")));
        assert!(!ok(&format!("a@b namespaces=git {key_text}")));
        assert!(!ok(&format!(
            "a@b namespaces=\"!bootstrap-mirror\" {key_text}"
        )));
    }
}
