//! Power: the reset that boots the inserted media (`On` when the system is off; a system that
//! is on is first powered off and seen Off, as ironic `redfish/power.py` `reboot` does, or,
//! where the BMC allows no `ForceOff`, restarted with `ForceRestart`; only values the BMC
//! advertises; `On` sent again while the BMC answers 409
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
    /// retried only when it cannot have acted, and a 202's task is followed. A boot of a system
    /// that is on powers it off first ([`Client::power_off`]) when the BMC allows it, so that
    /// this sends `On` to a system seen Off.
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
        let (target, allowed) = self.reset_values(&sys).await?;
        let kind = self.choose(preferred, allowed.as_deref(), &target)?;
        self.send_reset(&target, kind).await?;
        Ok(kind)
    }

    /// Whether a restart can be done as ironic `redfish/power.py` `reboot` does it, observably:
    /// `ForceOff`, and then `On` or `ForceOn`, both among the values the BMC allows (or the BMC
    /// advertises none). Where it cannot, the boot restarts with `ForceRestart` (ironic's path
    /// for `disable_power_off`) and only the boot's evidence tells that it restarted.
    pub async fn can_power_cycle(&self, sys: &SystemInfo) -> Result<bool, RedfishError> {
        let (_, allowed) = self.reset_values(sys).await?;
        Ok(match allowed {
            None => true,
            Some(allowed) => {
                let has = |k: ResetKind| allowed.iter().any(|a| a == k.as_str());
                has(ResetKind::ForceOff) && (has(ResetKind::On) || has(ResetKind::ForceOn))
            }
        })
    }

    /// `ForceOff`, then `PowerState` polled until it reads Off (ironic `redfish/power.py`
    /// `_set_power_state` waits for the state it set), for at most `Options.power_timeout`.
    pub async fn power_off(&self, sys: &SystemInfo) -> Result<(), RedfishError> {
        let (target, allowed) = self.reset_values(sys).await?;
        let kind = self.choose(&[ResetKind::ForceOff], allowed.as_deref(), &target)?;
        self.send_reset(&target, kind).await?;
        self.wait_power(sys, "Off").await
    }

    /// The system's reset action and the values it allows (`None`: not advertised).
    async fn reset_values(
        &self,
        sys: &SystemInfo,
    ) -> Result<(String, Option<Vec<String>>), RedfishError> {
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
        Ok((target.clone(), allowed))
    }

    /// The first of `preferred` the BMC allows.
    fn choose(
        &self,
        preferred: &[ResetKind],
        allowed: Option<&[String]>,
        target: &str,
    ) -> Result<ResetKind, RedfishError> {
        match allowed {
            None => Ok(preferred[0]),
            Some(allowed) => preferred
                .iter()
                .copied()
                .find(|k| allowed.iter().any(|a| a == k.as_str()))
                .ok_or_else(|| RedfishError::NotAllowed {
                    bmc: self.t.bmc.clone(),
                    path: target.to_string(),
                    wanted: preferred.iter().map(|k| k.to_string()).collect(),
                    allowed: allowed.to_vec(),
                }),
        }
    }

    /// POSTs one reset: retried only when it cannot have acted, `On` sent again while the BMC
    /// answers 409 `ActionParameterValueConflict` as its power state settles; a 202's task is
    /// followed.
    async fn send_reset(&self, target: &str, kind: ResetKind) -> Result<(), RedfishError> {
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
            return Ok(());
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
        self.wait_power(sys, "On").await
    }

    /// Polls `PowerState` every `Options.poll` until it is `want`, for at most
    /// `Options.power_timeout`.
    async fn wait_power(&self, sys: &SystemInfo, want: &str) -> Result<(), RedfishError> {
        let started = Instant::now();
        loop {
            let now = self.refresh(sys).await?;
            let state = now.power_state.unwrap_or_else(|| "(none)".to_string());
            if state == want {
                return Ok(());
            }
            if started.elapsed() + self.t.opts.poll > self.t.opts.power_timeout {
                return Err(RedfishError::Timeout {
                    bmc: self.t.bmc.clone(),
                    path: sys.path.clone(),
                    what: format!("PowerState {want}"),
                    waited: started.elapsed(),
                    last: state,
                });
            }
            tokio::time::sleep(self.t.opts.poll).await;
        }
    }
}
