//! What can go wrong talking to a BMC, worded for the engineer at the rack: every error names the
//! BMC (its address without credentials) and the Redfish path, and quotes the BMC's own reason
//! (`error.@Message.ExtendedInfo[].Message`, else `error.message`), which on iDRAC is the line
//! Dell's documentation indexes. No error ever holds a password or a session token.

use std::time::Duration;

use serde_json::Value;

/// A failure of a Redfish call or of what it was meant to achieve.
#[derive(Debug, thiserror::Error)]
pub enum RedfishError {
    /// The inventory's `bmc.address` is not a Redfish address this client can use.
    #[error("BMC address {address:?}: {reason}")]
    Address {
        /// The address as written (credentials removed).
        address: String,
        /// Why, and what to write instead.
        reason: String,
    },
    /// Credentials were given for a plain-HTTP address; nothing was sent.
    #[error("BMC {bmc}: refusing to send the BMC credentials over plain http:// (they would cross the network in clear); use https://{bmc} (Redfish over TLS), or no credentials for an emulator without authentication")]
    CleartextCredentials {
        /// The BMC host.
        bmc: String,
    },
    /// The TLS handshake failed: certificate not trusted, wrong name, or no common protocol.
    #[error("BMC {bmc}: TLS handshake failed while trusting {trust}: {detail}{}; {fix}", seen_fingerprint(.actual.as_deref()))]
    Tls {
        /// The BMC host.
        bmc: String,
        /// Which trust was used (system roots, the inventory CA, ...).
        trust: String,
        /// What rustls said.
        detail: String,
        /// The BMC certificate's SHA-256, when the handshake got that far (to pin it, once checked).
        actual: Option<String>,
        /// What to change in the inventory.
        fix: String,
    },
    /// The certificate's SHA-256 is not the pinned one.
    #[error("BMC {bmc}: its TLS certificate's SHA-256 fingerprint is {actual}, but nodes[].bmc.fingerprint pins {expected}; if the BMC's certificate was replaced on purpose, pin the new one after checking it (openssl s_client -connect {bmc} </dev/null | openssl x509 -noout -fingerprint -sha256)")]
    FingerprintMismatch {
        /// The BMC host.
        bmc: String,
        /// The pinned fingerprint (`AB:CD:...`).
        expected: String,
        /// The fingerprint the BMC presented.
        actual: String,
    },
    /// No answer after every attempt (connection refused, reset, timed out).
    #[error("BMC {bmc}: {method} {path}: no answer after {attempts} attempt(s): {detail}; check that the BMC address is reachable from this machine")]
    Unreachable {
        /// The BMC host.
        bmc: String,
        /// HTTP method.
        method: String,
        /// Redfish path.
        path: String,
        /// Attempts made.
        attempts: u32,
        /// The last network error.
        detail: String,
    },
    /// 401 (or 403 at login): the inventory's credentials are refused.
    #[error("BMC {bmc}: {method} {path}: wrong user or password for BMC {bmc} (credentials from the inventory){}", bmc_says(.message.as_deref()))]
    Unauthorized {
        /// The BMC host.
        bmc: String,
        /// HTTP method.
        method: String,
        /// Redfish path.
        path: String,
        /// The BMC's own message.
        message: Option<String>,
    },
    /// 401 to a client without credentials: the BMC wants some.
    #[error("BMC {bmc}: {method} {path}: the BMC asks for credentials and the inventory gives none; set nodes[].bmc.credentials{}", bmc_says(.message.as_deref()))]
    CredentialsNeeded {
        /// The BMC host.
        bmc: String,
        /// HTTP method.
        method: String,
        /// Redfish path.
        path: String,
        /// The BMC's own message.
        message: Option<String>,
    },
    /// The BMC answered an error status.
    #[error("BMC {bmc}: {method} {path} answered {status}{}", bmc_says(.message.as_deref()))]
    Status {
        /// The BMC host.
        bmc: String,
        /// HTTP method.
        method: String,
        /// Redfish path.
        path: String,
        /// HTTP status.
        status: u16,
        /// The BMC's own message (`@Message.ExtendedInfo`, `error.message`, or the body's text).
        message: Option<String>,
        /// The `MessageId`s of `@Message.ExtendedInfo` and `error.code`, to branch on.
        message_ids: Vec<String>,
    },
    /// An answer without what Redfish says it holds.
    #[error("BMC {bmc}: {path}: {what}")]
    Unexpected {
        /// The BMC host.
        bmc: String,
        /// Redfish path.
        path: String,
        /// What was missing or malformed.
        what: String,
    },
    /// `/redfish/v1/Systems` lists more than one system and the address names none.
    #[error("BMC {bmc}: /redfish/v1/Systems has {} systems ({}); write the full system URL as nodes[].bmc.address, e.g. https://{bmc}{}", .systems.len(), .systems.join(", "), .systems.first().map(String::as_str).unwrap_or(""))]
    SeveralSystems {
        /// The BMC host.
        bmc: String,
        /// The systems' paths.
        systems: Vec<String>,
    },
    /// No virtual CD/DVD device under the system or its managers.
    #[error("BMC {bmc}: no virtual media device with CD or DVD in MediaTypes under {}; this BMC cannot boot an ISO over Redfish virtual media (is the virtual media licence installed?)", .searched.join(", "))]
    NoVirtualCd {
        /// The BMC host.
        bmc: String,
        /// The collections looked at.
        searched: Vec<String>,
    },
    /// The action value we need is not among the advertised allowed values.
    #[error("BMC {bmc}: {path}: none of {} is allowed (the BMC allows {})", .wanted.join(", "), .allowed.join(", "))]
    NotAllowed {
        /// The BMC host.
        bmc: String,
        /// Redfish path of the action or property.
        path: String,
        /// What we would use, in order of preference.
        wanted: Vec<String>,
        /// What the BMC advertises.
        allowed: Vec<String>,
    },
    /// The BMC accepted a change but reads back something else.
    #[error("BMC {bmc}: {path}: after {what} the BMC reads back {actual}, expected {expected}")]
    ReadBack {
        /// The BMC host.
        bmc: String,
        /// Redfish path read back.
        path: String,
        /// The change made.
        what: String,
        /// What we asked for.
        expected: String,
        /// What the BMC shows.
        actual: String,
    },
    /// A task (202 + Location) ended in Exception, Killed, Cancelled or a failed Dell job.
    #[error("BMC {bmc}: {path}: the task for {what} ended {state}{}", bmc_says(Some(&.messages.join("; ")).filter(|m| !m.is_empty()).map(String::as_str)))]
    TaskFailed {
        /// The BMC host.
        bmc: String,
        /// The task monitor's path.
        path: String,
        /// The request the task carries out.
        what: String,
        /// TaskState (or Dell JobState).
        state: String,
        /// The task's messages.
        messages: Vec<String>,
    },
    /// The BMC kept refusing for a reason that passes (an iDRAC job running, a configuration
    /// pending) until the retries ran out.
    #[error("BMC {bmc}: {path}: still refused with {message_id} after {tries} tries in {}s{}; {fix}", .waited.as_secs(), bmc_says(.message.as_deref()))]
    Busy {
        /// The BMC host.
        bmc: String,
        /// The action's path.
        path: String,
        /// The refusal's `MessageId` (`RAC0679`, `LC068`).
        message_id: &'static str,
        /// The BMC's own message.
        message: Option<String>,
        /// Requests sent.
        tries: u32,
        /// How long it was waited out.
        waited: Duration,
        /// What clears it.
        fix: &'static str,
    },
    /// An answer larger than [`crate::redfish::ANSWER_MAX`]: refused without reading it whole,
    /// and not retried (the same answer would come again).
    #[error("BMC {bmc}: {method} {path}: the answer {size}, more than the {cap} bytes a Redfish answer may be; refused without reading further, and not retried. A Redfish document is a few KiB: the BMC's Redfish service is misbehaving, or something else answers at this address; check nodes[].bmc.address, reset the BMC (iDRAC: racadm racreset; iLO: Information > Diagnostics > Reset iLO) or update its firmware, then run bootstrap again")]
    AnswerTooLarge {
        /// The BMC host.
        bmc: String,
        /// HTTP method.
        method: String,
        /// Redfish path.
        path: String,
        /// What was seen of its size.
        size: crate::redfish::AnswerSize,
        /// The cap, in bytes.
        cap: u64,
    },
    /// A task monitor still reported its task unfinished when `Options.task_timeout` ran out.
    #[error("BMC {bmc}: the task {task} (for {what}) is still {state} after {waited_secs}s, the most a task is followed{}; the BMC's job never ended: look at its job queue (iDRAC: Maintenance > Job Queue, racadm jobqueue view; others: /redfish/v1/TaskService/Tasks), delete the stuck job or reset the BMC, then run bootstrap again", bmc_says(.message.as_deref()))]
    TaskTimeout {
        /// The BMC host.
        bmc: String,
        /// The task monitor's path.
        task: String,
        /// The request that started it (`POST /redfish/v1/...`); boxed, and the wait kept in
        /// seconds, so that this enum, carried by every `Result`, stays within clippy's
        /// `result_large_err`.
        what: Box<str>,
        /// Its last `TaskState` (or Dell `JobState`) with the monitor's status, e.g.
        /// `Running (202)`.
        state: String,
        /// Its last message (`Messages[].Message`, `Message`), if it gave one.
        message: Option<String>,
        /// How long it was followed, in seconds.
        waited_secs: u64,
    },
    /// A wait (the power state) ran out; a task's is [`RedfishError::TaskTimeout`].
    #[error("BMC {bmc}: {path}: {what} not done after {}s (last seen: {last})", .waited.as_secs())]
    Timeout {
        /// The BMC host.
        bmc: String,
        /// Redfish path polled.
        path: String,
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
        /// The last state seen.
        last: String,
    },
}

impl RedfishError {
    /// The BMC's own message, when the BMC gave one.
    pub fn bmc_message(&self) -> Option<&str> {
        match self {
            RedfishError::Status { message, .. }
            | RedfishError::Unauthorized { message, .. }
            | RedfishError::CredentialsNeeded { message, .. } => message.as_deref(),
            _ => None,
        }
    }

    /// True for wrong or missing credentials (a 401).
    pub fn is_unauthorized(&self) -> bool {
        matches!(
            self,
            RedfishError::Unauthorized { .. } | RedfishError::CredentialsNeeded { .. }
        )
    }

    /// The HTTP status of a refused request.
    pub fn status(&self) -> Option<u16> {
        match self {
            RedfishError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

fn bmc_says(message: Option<&str>) -> String {
    match message {
        Some(m) if !m.is_empty() => format!(": the BMC says: {m}"),
        _ => String::new(),
    }
}

fn seen_fingerprint(actual: Option<&str>) -> String {
    match actual {
        Some(fp) => format!(" (its certificate's SHA-256 is {fp})"),
        None => String::new(),
    }
}

/// What a Redfish error body says: the messages to quote, and the ids and related properties
/// the fallbacks branch on.
#[derive(Debug, Default)]
pub(crate) struct BmcReason {
    pub message: Option<String>,
    pub message_ids: Vec<String>,
    pub related: Vec<String>,
}

impl BmcReason {
    /// Reads `{"error": {"code", "message", "@Message.ExtendedInfo": [...]}}`, or quotes a
    /// non-JSON body's text.
    pub fn of(body: &[u8]) -> BmcReason {
        let Ok(json) = serde_json::from_slice::<Value>(body) else {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            return BmcReason {
                message: (!text.is_empty()).then(|| crate::secret::server_text(text, 300)),
                ..Default::default()
            };
        };
        let error = json.get("error").unwrap_or(&json);
        let mut reason = BmcReason::default();
        let mut messages = Vec::new();
        if let Some(code) = error.get("code").and_then(Value::as_str) {
            reason.message_ids.push(code.to_string());
        }
        let extended = error
            .get("@Message.ExtendedInfo")
            .or_else(|| json.get("@Message.ExtendedInfo"));
        for info in extended.and_then(Value::as_array).into_iter().flatten() {
            if let Some(id) = info.get("MessageId").and_then(Value::as_str) {
                reason.message_ids.push(id.to_string());
            }
            // A BMC may leave `Message` out and say only `MessageId` (and a `Resolution`):
            // quote those rather than the generic "see ExtendedInfo" of `error.message`.
            let message = info.get("Message").and_then(Value::as_str);
            let id = info.get("MessageId").and_then(Value::as_str);
            match (message, id) {
                (Some(m), _) => messages.push(crate::secret::server_text(m, 300)),
                (None, Some(id)) => {
                    let mut text = format!("MessageId {id}");
                    let args = strings_of(info.get("MessageArgs"));
                    if !args.is_empty() {
                        text.push_str(&format!(" ({})", args.join(", ")));
                    }
                    if let Some(r) = info.get("Resolution").and_then(Value::as_str) {
                        text.push_str(&format!("; resolution: {r}"));
                    }
                    messages.push(crate::secret::server_text(&text, 300));
                }
                (None, None) => {}
            }
            for p in info
                .get("RelatedProperties")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                reason.related.push(p.to_string());
            }
        }
        if messages.is_empty() {
            if let Some(m) = error.get("message").and_then(Value::as_str) {
                messages.push(crate::secret::server_text(m, 300));
            }
        }
        if !messages.is_empty() {
            reason.message = Some(messages.join("; "));
        }
        reason
    }

    /// True when the ids, related properties or message name `word`.
    pub fn names(&self, word: &str) -> bool {
        self.message_ids.iter().any(|i| i.contains(word))
            || self.related.iter().any(|p| p.contains(word))
            || self.message.as_deref().is_some_and(|m| m.contains(word))
    }
}

fn strings_of(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_info_is_quoted_and_ids_kept() {
        let body = br##"{"error":{"code":"Base.1.8.GeneralError","message":"See ExtendedInfo",
            "@Message.ExtendedInfo":[{"MessageId":"Base.1.8.ActionParameterMissing",
            "Message":"The action requires the parameter TransferProtocolType.",
            "RelatedProperties":["#/TransferProtocolType"]}]}}"##;
        let r = BmcReason::of(body);
        assert_eq!(
            r.message.as_deref(),
            Some("The action requires the parameter TransferProtocolType.")
        );
        assert!(r.names("ActionParameterMissing"));
        assert!(r.names("TransferProtocolType"));
        assert!(!r.names("TransferMethod"));
    }

    /// The operator once saw only "See @Message.ExtendedInfo for more information": an entry
    /// without `Message` is quoted by its `MessageId`, arguments and resolution.
    #[test]
    fn extended_info_without_message_quotes_its_message_id() {
        let body = br##"{"error":{"code":"Base.1.8.GeneralError",
            "message":"A general error has occurred. See @Message.ExtendedInfo for more information",
            "@Message.ExtendedInfo":[{"MessageId":"IDRAC.2.8.LC068","MessageArgs":["x"],
            "Resolution":"Clear the job queue"}]}}"##;
        let r = BmcReason::of(body);
        assert_eq!(
            r.message.as_deref(),
            Some("MessageId IDRAC.2.8.LC068 (x); resolution: Clear the job queue")
        );
        assert!(r.names("LC068"));
    }

    #[test]
    fn plain_error_message_and_text_bodies_are_quoted() {
        let r = BmcReason::of(br#"{"error":{"code":"X","message":"busy"}}"#);
        assert_eq!(r.message.as_deref(), Some("busy"));
        let r = BmcReason::of(b"<html>oops</html>");
        assert_eq!(r.message.as_deref(), Some("<html>oops</html>"));
    }
}
