//! Power: the reset that boots the inserted media (`On` when the system is off, `ForceRestart`
//! otherwise, only from the values the BMC advertises; `On` sent again while the BMC answers 409
//! `ActionParameterValueConflict` as its power state settles, as ironic `redfish/power.py` does),
//! and the wait for `PowerState` On.

use std::time::Instant;

use reqwest::Method;
use serde_json::{json, Value};

use super::error::{BmcReason, RedfishError};
use super::http::Retry;
use super::{strings, Client, ResetKind, SystemInfo};

impl Client {
    /// Resets the system so it boots the override: `On` (else `ForceOn`) when `PowerState` is
    /// Off, `ForceRestart` (else `PowerCycle`, `GracefulRestart`) otherwise, the first the BMC
    /// allows (`ResetType@Redfish.AllowableValues`, or the action's ActionInfo). The POST is
    /// retried only when it cannot have acted, and a 202's task is followed.
    pub async fn reset_for_boot(&self, sys: &SystemInfo) -> Result<ResetKind, RedfishError> {
        let sys = self.refresh(sys).await?;
        let preferred: &[ResetKind] = if sys.power_state.as_deref() == Some("Off") {
            &[ResetKind::On, ResetKind::ForceOn]
        } else {
            &[
                ResetKind::ForceRestart,
                ResetKind::PowerCycle,
                ResetKind::GracefulRestart,
            ]
        };
        let Some(target) = &sys.links.reset_target else {
            return Err(RedfishError::Unexpected {
                bmc: self.t.bmc.clone(),
                path: sys.path.clone(),
                what: "the system has no #ComputerSystem.Reset action".to_string(),
            });
        };
        let allowed = match (&sys.links.reset_allowed, &sys.links.reset_info) {
            (Some(allowed), _) => Some(allowed.clone()),
            (None, Some(info)) => self.action_info_values(info, "ResetType").await?,
            (None, None) => None,
        };
        let kind = match &allowed {
            None => preferred[0],
            Some(allowed) => *preferred
                .iter()
                .find(|k| allowed.iter().any(|a| a == k.as_str()))
                .ok_or_else(|| RedfishError::NotAllowed {
                    bmc: self.t.bmc.clone(),
                    path: target.clone(),
                    wanted: preferred.iter().map(|k| k.to_string()).collect(),
                    allowed: allowed.clone(),
                })?,
        };
        let body = json!({"ResetType": kind.as_str()});
        let waits = self.t.opts.waits;
        let mut conflicts = 0;
        loop {
            let answer = self
                .t
                .request(Method::POST, target, Some(&body), None, Retry::Unsent)
                .await?;
            // A 409 did nothing: sending the same power-on again cannot reset the node twice.
            let settling = answer.status == 409
                && matches!(kind, ResetKind::On | ResetKind::ForceOn)
                && BmcReason::of(&answer.body).names("ActionParameterValueConflict");
            if settling && conflicts < waits.on_conflict_retries {
                conflicts += 1;
                tracing::warn!(bmc = %self.t.bmc, path = %target, conflicts, "the BMC refuses the power-on while its power state settles (409); trying again");
                tokio::time::sleep(waits.on_conflict_interval).await;
                continue;
            }
            let answer = self.t.check(&Method::POST, target, answer)?;
            self.t.follow_task(target, "POST", answer).await?;
            return Ok(kind);
        }
    }

    /// `AllowableValues` of a parameter in an ActionInfo resource.
    async fn action_info_values(
        &self,
        info: &str,
        name: &str,
    ) -> Result<Option<Vec<String>>, RedfishError> {
        let (body, _) = self.t.get(info).await?;
        Ok(body
            .get("Parameters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("Name").and_then(Value::as_str) == Some(name))
            .and_then(|p| strings(p.get("AllowableValues"))))
    }

    /// Polls `PowerState` every `Options.poll` until it is On, for at most
    /// `Options.power_timeout`.
    pub async fn wait_power_on(&self, sys: &SystemInfo) -> Result<(), RedfishError> {
        let started = Instant::now();
        loop {
            let now = self.refresh(sys).await?;
            let state = now.power_state.unwrap_or_else(|| "(none)".to_string());
            if state == "On" {
                return Ok(());
            }
            if started.elapsed() + self.t.opts.poll > self.t.opts.power_timeout {
                return Err(RedfishError::Timeout {
                    bmc: self.t.bmc.clone(),
                    path: sys.path.clone(),
                    what: "PowerState On".to_string(),
                    waited: started.elapsed(),
                    last: state,
                });
            }
            tokio::time::sleep(self.t.opts.poll).await;
        }
    }
}
