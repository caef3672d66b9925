//! The iDRAC's log services, for `bootstrap gather`: `Managers/iDRAC.Embedded.1/LogServices`
//! lists `Lclog` (the Lifecycle Controller log) and `Sel` (the system event log), as Dell's
//! iDRAC Redfish API guide shows them; each service's `Entries` collection pages its members 50
//! at a time with `Members@odata.count` and a `Members@odata.nextLink` of `?$skip=N`, as the DMTF
//! Redfish specification's paging and iDRAC do. sushy and sushy-tools have no log services, so
//! this is read from those two documents, not from an emulator.

use serde_json::{json, Value};

use super::{reply, Reply, MANAGER};

/// Entries per page.
const PAGE: u32 = 50;

/// The manager's `LogServices` collection.
pub(super) fn collection() -> String {
    format!("{MANAGER}/LogServices")
}

/// The answer to a GET of `path` under the log services, with `total` entries in each log;
/// `None` when `path` is not one of theirs.
pub(super) fn get(path: &str, total: u32) -> Option<Reply> {
    let base = collection();
    let rest = path.strip_prefix(&base)?;
    if rest.is_empty() {
        let members: Vec<Value> = ["Lclog", "Sel"]
            .iter()
            .map(|id| json!({"@odata.id": format!("{base}/{id}")}))
            .collect();
        return Some(reply(
            200,
            json!({"@odata.id": base, "Members": members, "Members@odata.count": 2}),
        ));
    }
    let (id, entries) = match rest.trim_start_matches('/').split_once('/') {
        Some((id, entries)) => (id, Some(entries)),
        None => (rest.trim_start_matches('/'), None),
    };
    if !["Lclog", "Sel"].contains(&id) {
        return None;
    }
    let service = format!("{base}/{id}");
    let Some(entries) = entries else {
        return Some(reply(
            200,
            json!({"@odata.id": service, "Id": id,
            "Entries": {"@odata.id": format!("{service}/Entries")}}),
        ));
    };
    let skip: u32 = match entries.strip_prefix("Entries") {
        Some("") => 0,
        Some(q) => q.strip_prefix("?$skip=")?.parse().ok()?,
        None => return None,
    };
    let end = (skip + PAGE).min(total);
    let members: Vec<Value> = (skip..end)
        .map(|n| {
            json!({"@odata.id": format!("{service}/Entries/{n}"), "Id": n.to_string(),
            "Message": format!("{id} entry {n}"), "Severity": "OK"})
        })
        .collect();
    let mut page = json!({"@odata.id": format!("{service}/Entries"), "Members": members,
        "Members@odata.count": total});
    if end < total {
        page["Members@odata.nextLink"] = json!(format!("{service}/Entries?$skip={end}"));
    }
    Some(reply(200, page))
}
