//! Read-only views for a support bundle: the system and its managers as the BMC describes them,
//! and the entries of their `LogServices` (Dell's iDRAC offers `Lclog` and `Sel` under
//! `Managers/iDRAC.Embedded.1/LogServices`; others whatever the collection lists), followed
//! through `Members@odata.nextLink` up to a count, as DMTF's Redfish log collections page them.
//! Only GETs are sent. A BMC that offers no log service (sushy-tools' emulator has none) is an
//! empty list, not an error.

use super::session::odata_id;
use super::{Client, RedfishError, SystemInfo};
use serde::Serialize;
use serde_json::Value;

/// Pages followed at most for one log, however few entries each holds (a BMC that pages
/// forever must not hold the gather).
const MAX_PAGES: usize = 100;

/// A log service of the system or of one of its managers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogService {
    /// Its path (`/redfish/v1/Managers/iDRAC.Embedded.1/LogServices/Sel`).
    pub path: String,
    /// `Id` (`Sel`, `Lclog`, `EventLog`), else the path's last segment.
    pub id: String,
    /// `system`, or the manager's `Id`.
    pub owner: String,
}

/// A log's entries, newest pages as the BMC orders them, at most the count asked for.
#[derive(Clone, Debug, Serialize)]
pub struct LogEntries {
    /// The entries as the BMC sent them.
    pub entries: Vec<Value>,
    /// Whether more were offered than kept (`Members@odata.count`, or a next page left).
    pub truncated: bool,
}

impl Client {
    /// The system's document and each manager's, `(path, document)`, as the BMC sends them.
    pub async fn inventory(&self, sys: &SystemInfo) -> Result<Vec<(String, Value)>, RedfishError> {
        let mut docs = vec![(sys.path.clone(), self.t.get(&sys.path).await?.0)];
        for manager in &sys.links.managers {
            docs.push((manager.clone(), self.t.get(manager).await?.0));
        }
        Ok(docs)
    }

    /// Every log service the system and its managers list; empty when the BMC offers none.
    pub async fn log_services(&self, sys: &SystemInfo) -> Result<Vec<LogService>, RedfishError> {
        let mut owners = vec![("system".to_string(), sys.path.clone())];
        for manager in &sys.links.managers {
            let id = manager.rsplit('/').next().unwrap_or(manager).to_string();
            owners.push((id, manager.clone()));
        }
        let mut services = Vec::new();
        for (owner, path) in owners {
            let (doc, _) = self.t.get(&path).await?;
            let Some(collection) = odata_id(doc.get("LogServices")) else {
                continue;
            };
            let (list, _) = self.t.get(&collection).await?;
            for member in super::members(&list) {
                let id = member.rsplit('/').next().unwrap_or(&member).to_string();
                services.push(LogService {
                    path: member,
                    id,
                    owner: owner.clone(),
                });
            }
        }
        Ok(services)
    }

    /// At most `max` entries of `service`, its `Entries` collection followed page by page.
    pub async fn log_entries(
        &self,
        service: &LogService,
        max: usize,
    ) -> Result<LogEntries, RedfishError> {
        let (doc, _) = self.t.get(&service.path).await?;
        let mut next = odata_id(doc.get("Entries"));
        let mut out = LogEntries {
            entries: Vec::new(),
            truncated: false,
        };
        let mut pages = 0;
        while let Some(path) = next.take() {
            pages += 1;
            let (page, _) = self.t.get(&path).await?;
            let members = page.get("Members").and_then(Value::as_array);
            for entry in members.into_iter().flatten() {
                if out.entries.len() == max {
                    out.truncated = true;
                    return Ok(out);
                }
                out.entries.push(entry.clone());
            }
            next = page
                .get("Members@odata.nextLink")
                .and_then(Value::as_str)
                .map(str::to_string);
            if pages == MAX_PAGES && next.is_some() {
                out.truncated = true;
                return Ok(out);
            }
        }
        Ok(out)
    }
}
