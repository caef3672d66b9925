//! The fake BMC's resources and actions: what each request does to its [`State`] and what it
//! answers, with iDRAC's behaviours behind the [`super::Switches`]. Apart from `mod.rs` (the
//! switches, the server, the request log), because it is what changes when another vendor's
//! behaviour is imitated.

use super::*;

impl State {
    pub(super) fn handle(&mut self, req: &Incoming) -> Reply {
        let key = (req.method.clone(), req.path.clone());
        if let Some(left) = self.errors_left.get_mut(&key) {
            if *left > 0 {
                *left -= 1;
                return error(
                    500,
                    "Base.1.12.InternalError",
                    "The request failed due to an internal service error.",
                    &[],
                );
            }
        }
        let open = (req.method == "GET" && (req.path == ROOT || req.path == "/redfish/v1"))
            || (req.method == "POST" && req.path == SESSIONS);
        if !open && !self.authorized(req) {
            return error(
                401,
                "Base.1.12.NoValidSession",
                "There is no valid session established with the implementation.",
                &[],
            );
        }
        if req.method == "POST" && req.headers.contains_key("if-match") {
            // iDRAC: an action POST carrying If-Match fails the precondition.
            return error(
                412,
                "Base.1.12.PreconditionFailed",
                "The ETag supplied did not match the ETag required to change this resource.",
                &[],
            );
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", ROOT) | ("GET", "/redfish/v1") => reply(200, self.root()),
            ("POST", SESSIONS) => self.login(&body),
            ("DELETE", p) if p.starts_with(&format!("{SESSIONS}/")) => self.logout(p),
            ("GET", SYSTEMS) => reply(200, self.systems()),
            ("GET", SYSTEM) => self.system(),
            ("PATCH", SYSTEM) => self.patch_system(req, &body),
            ("GET", SETTINGS) if self.sw.boot_via_settings => self.settings(),
            ("PATCH", SETTINGS) if self.sw.boot_via_settings => self.patch_settings(req, &body),
            ("GET", RESET_INFO) if self.sw.reset_action_info => reply(
                200,
                json!({
                "@odata.id": RESET_INFO, "Id": "ResetActionInfo",
                "Parameters": [{"Name": "ResetType", "Required": true, "DataType": "String",
                                "AllowableValues": self.sw.reset_allowed}]}),
            ),
            ("POST", RESET) => self.reset(&body),
            ("GET", "/redfish/v1/Systems/System.Embedded.1/EthernetInterfaces") => {
                reply(200, self.nics())
            }
            ("GET", p)
                if p.starts_with("/redfish/v1/Systems/System.Embedded.1/EthernetInterfaces/") =>
            {
                self.nic(p)
            }
            ("GET", MANAGER) => reply(200, self.manager()),
            ("GET", p)
                if self.sw.log_entries.is_some() && p.starts_with(&super::logs::collection()) =>
            {
                let total = self.sw.log_entries.unwrap_or_default();
                super::logs::get(p, total).unwrap_or_else(|| {
                    error(404, "Base.1.12.ResourceMissingAtURI", "No such log.", &[])
                })
            }
            ("POST", IMPORT) => self.import(&body),
            ("GET", p) if p == self.media_collection() => reply(200, self.media_collection_body()),
            ("GET", p) if self.media_paths().contains(&p.to_string()) => self.media(p),
            ("PATCH", p) if p == self.cd_path() && !self.sw.media_actions => {
                self.patch_media(req, &body)
            }
            ("POST", p)
                if p == format!("{}/Actions/VirtualMedia.InsertMedia", self.cd_path())
                    && self.sw.media_actions =>
            {
                self.insert(&body)
            }
            ("POST", p)
                if self.second_cd()
                    && p == format!("{SYSTEM}/VirtualMedia/2/Actions/VirtualMedia.InsertMedia") =>
            {
                self.slot2 = Slot {
                    inserted: true,
                    image: body
                        .get("Image")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                };
                reply(204, Value::Null)
            }
            // iDRAC 10's member 2 ejects like member 1 (ironic `redfish/boot.py`
            // `_eject_vmedia` ejects every member holding an image).
            ("POST", p)
                if self.second_cd()
                    && p == format!("{SYSTEM}/VirtualMedia/2/Actions/VirtualMedia.EjectMedia") =>
            {
                self.slot2 = Slot::default();
                reply(204, Value::Null)
            }
            ("POST", p)
                if p == format!("{}/Actions/VirtualMedia.EjectMedia", self.cd_path())
                    && self.sw.media_actions =>
            {
                self.eject(&req.body)
            }
            ("GET", p) if p.starts_with(TASKS) => self.task(p),
            _ => error(
                404,
                "Base.1.12.ResourceMissingAtURI",
                &format!("The resource at the URI {} was not found.", req.path),
                &[],
            ),
        }
    }

    fn authorized(&self, req: &Incoming) -> bool {
        if let Some(token) = req.headers.get("x-auth-token") {
            return self.sessions.values().any(|t| t == token);
        }
        let expected = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.sw.user, self.sw.password));
        req.headers.get("authorization") == Some(&format!("Basic {expected}"))
    }

    fn etag(&self) -> Option<String> {
        self.sw.etags.then(|| format!("W/\"{}\"", self.generation))
    }

    fn with_etag(&self, mut r: Reply) -> Reply {
        if let Some(tag) = self.etag() {
            r.headers.push(("ETag", tag));
        }
        r
    }

    /// 412 when an If-Match is given and is not the current ETag.
    fn stale(&self, req: &Incoming) -> Option<Reply> {
        let given = req.headers.get("if-match")?;
        let current = self.etag();
        let strong = current.as_deref().map(|t| t.trim_start_matches("W/"));
        let matches = match (self.sw.if_match_refused, self.sw.weak_etag_refused) {
            (true, _) => false,
            // sushy connector.py: some BMCs hand out weak ETags and take only the strong form.
            (false, true) => strong == Some(given.as_str()),
            (false, false) => current.as_ref() == Some(given),
        };
        (!matches).then(|| {
            error(
                412,
                "Base.1.12.PreconditionFailed",
                "The ETag supplied did not match the ETag required to change this resource.",
                &[],
            )
        })
    }

    fn changed(&mut self) {
        self.generation += 1;
    }

    fn root(&self) -> Value {
        let mut root = json!({
            "@odata.id": ROOT, "Id": "RootService", "RedfishVersion": "1.17.0",
            "Systems": {"@odata.id": SYSTEMS},
            "Managers": {"@odata.id": "/redfish/v1/Managers"},
            "Links": {},
        });
        if self.sw.session_service {
            root["SessionService"] = json!({"@odata.id": "/redfish/v1/SessionService"});
            root["Links"]["Sessions"] = json!({"@odata.id": SESSIONS});
        }
        root
    }

    fn login(&mut self, body: &Value) -> Reply {
        if !self.sw.session_service {
            return error(
                404,
                "Base.1.12.ResourceMissingAtURI",
                "The resource at the URI was not found.",
                &[],
            );
        }
        if body["UserName"] != self.sw.user.as_str()
            || body["Password"] != self.sw.password.as_str()
        {
            return error(401, "Base.1.12.InsufficientPrivilege", "Unable to complete the operation because an invalid username and/or password is entered, and therefore authentication failed.", &[]);
        }
        let id = self.next_id;
        self.next_id += 1;
        let token = format!("token-{id}-{:x}", self.generation * 7919 + id);
        let path = format!("{SESSIONS}/{id}");
        self.sessions.insert(path.clone(), token.clone());
        self.sessions_created += 1;
        Reply {
            status: 201,
            headers: vec![("X-Auth-Token", token), ("Location", path.clone())],
            body: json!({"@odata.id": path, "Id": id.to_string(), "UserName": self.sw.user}),
        }
    }

    fn logout(&mut self, path: &str) -> Reply {
        match self.sessions.remove(path) {
            Some(_) => reply(204, Value::Null),
            None => error(
                404,
                "Base.1.12.ResourceMissingAtURI",
                "No such session.",
                &[],
            ),
        }
    }

    fn systems(&self) -> Value {
        let members: Vec<Value> = (1..=self.sw.systems)
            .map(|n| json!({"@odata.id": format!("{SYSTEMS}/System.Embedded.{n}")}))
            .collect();
        json!({"@odata.id": SYSTEMS, "Members": members, "Members@odata.count": members.len()})
    }

    fn system(&mut self) -> Reply {
        if self.power == "PoweringOn" {
            if self.powering_reads == 0 {
                self.power = "On".to_string();
            } else {
                self.powering_reads -= 1;
            }
        }
        let mut reset = json!({"target": RESET});
        if self.sw.reset_action_info {
            reset["@Redfish.ActionInfo"] = json!(RESET_INFO);
        } else if let Some(allowed) = &self.sw.reset_allowed {
            reset["ResetType@Redfish.AllowableValues"] = json!(allowed);
        }
        let mut sys = json!({
            "@odata.id": SYSTEM, "Id": "System.Embedded.1", "Name": "System",
            "Manufacturer": self.vendor().manufacturer(), "Model": self.vendor().model(),
            "BiosVersion": "2.3.5", "SerialNumber": "CN7016321A0042",
            "UUID": "4c4c4544-0042-3010-8036-c4c04f333233",
            "PowerState": self.power,
            "Boot": {
                "BootSourceOverrideTarget": self.boot.0,
                "BootSourceOverrideEnabled": self.boot.1,
                "BootSourceOverrideMode": "UEFI",
                "BootSourceOverrideTarget@Redfish.AllowableValues": self.vendor().boot_targets(),
            },
            "EthernetInterfaces": {"@odata.id": format!("{SYSTEM}/EthernetInterfaces")},
            "Links": {"ManagedBy": [{"@odata.id": MANAGER}]},
            "Actions": {"#ComputerSystem.Reset": reset},
        });
        if self.sw.media_under == MediaUnder::System {
            sys["VirtualMedia"] = json!({"@odata.id": format!("{SYSTEM}/VirtualMedia")});
        }
        if self.sw.boot_via_settings {
            sys["@Redfish.Settings"] = json!({
                "@odata.type": "#Settings.v1_3_5.Settings",
                "SettingsObject": {"@odata.id": SETTINGS},
                "SupportedApplyTimes": ["OnReset"],
            });
        }
        self.with_etag(reply(200, sys))
    }

    fn patch_system(&mut self, req: &Incoming, body: &Value) -> Reply {
        if let Some(r) = self.stale(req) {
            return r;
        }
        let Some(boot) = body.get("Boot") else {
            return reply(200, Value::Null);
        };
        if self.sw.boot_via_settings {
            return error(400, "Base.1.12.PropertyNotWritable", "The property Boot is a read only property and cannot be assigned a value. Use the Settings resource of the system.", &["#/Boot"]);
        }
        if let Some(refusal) = self.refuse_boot_patch() {
            return refusal;
        }
        self.boot_mode_sent = boot.get("BootSourceOverrideMode").is_some();
        if self.sw.boot_oem_only {
            return error(400, "Base.1.12.PropertyValueNotInList", "The value Cd for the property BootSourceOverrideTarget is not in the list of acceptable values.", &["#/Boot/BootSourceOverrideTarget"]);
        }
        if !self.sw.boot_ignored {
            self.boot = boot_of(boot, &self.boot);
            self.changed();
        }
        reply(204, Value::Null)
    }

    fn settings(&self) -> Reply {
        let (t, e) = self
            .pending_boot
            .clone()
            .unwrap_or_else(|| self.boot.clone());
        self.with_etag(reply(
            200,
            json!({
                "@odata.id": SETTINGS, "Id": "Settings",
                "Boot": {"BootSourceOverrideTarget": t, "BootSourceOverrideEnabled": e},
            }),
        ))
    }

    fn patch_settings(&mut self, req: &Incoming, body: &Value) -> Reply {
        if let Some(r) = self.stale(req) {
            return r;
        }
        if let Some(boot) = body.get("Boot") {
            let base = self
                .pending_boot
                .clone()
                .unwrap_or_else(|| self.boot.clone());
            self.pending_boot = Some(boot_of(boot, &base));
            self.changed();
        }
        reply(202, Value::Null)
    }

    fn reset(&mut self, body: &Value) -> Reply {
        let Some(kind) = body.get("ResetType").and_then(Value::as_str) else {
            return error(400, "Base.1.12.ActionParameterMissing", "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.", &["#/ResetType"]);
        };
        if let Some(allowed) = &self.sw.reset_allowed {
            if !allowed.iter().any(|a| a == kind) {
                return error(400, "Base.1.12.ActionParameterValueNotInList", &format!("The value {kind} for the parameter ResetType is not in the list of acceptable values."), &["#/ResetType"]);
            }
        }
        let on = self.power != "Off";
        if kind == "On" && !on && self.on_conflicts_left > 0 {
            // ironic redfish/power.py: iDRAC 10 refuses On for a while after a power-off.
            self.on_conflicts_left -= 1;
            return error(409, "Base.1.12.ActionParameterValueConflict", "The parameter ResetType with the value On conflicts with the current state of the resource.", &["#/ResetType"]);
        }
        match kind {
            "On" | "ForceOn" if on => {
                return error(
                    409,
                    "IDRAC.2.9.PSU501",
                    "Unable to perform the operation because the server is already powered ON.",
                    &[],
                )
            }
            "ForceRestart" | "GracefulRestart" | "PowerCycle" if !on => {
                return error(
                    409,
                    "IDRAC.2.9.PSU502",
                    "Unable to perform the operation because the server is powered OFF.",
                    &[],
                )
            }
            _ => {}
        }
        self.resets.push(kind.to_string());
        if matches!(kind, "ForceOff" | "GracefulShutdown") {
            if !on {
                self.resets.pop();
                return error(
                    409,
                    "IDRAC.2.9.PSU502",
                    "Unable to perform the operation because the server is powered OFF.",
                    &[],
                );
            }
            self.power = "Off".to_string();
        }
        if matches!(
            kind,
            "On" | "ForceOn" | "ForceRestart" | "GracefulRestart" | "PowerCycle"
        ) {
            if self.sw.powering_on_reads > 0 && !on {
                self.power = "PoweringOn".to_string();
                self.powering_reads = self.sw.powering_on_reads;
            } else {
                self.power = "On".to_string();
            }
            if let Some(pending) = self.pending_boot.take() {
                self.boot = pending;
            }
            let booted = self.boots();
            self.booted.push(booted);
        }
        self.changed();
        if self.sw.reset_task {
            return self.new_task(Effect::None);
        }
        reply(204, Value::Null)
    }

    fn new_task(&mut self, effect: Effect) -> Reply {
        let id = format!("JID_{:012}", self.next_id);
        self.next_id += 1;
        self.tasks.insert(
            id.clone(),
            Task {
                polls_left: self.sw.task_polls,
                effect,
            },
        );
        let path = format!("{TASKS}{id}");
        Reply {
            status: 202,
            headers: vec![("Location", path)],
            body: Value::Null,
        }
    }

    fn task(&mut self, path: &str) -> Reply {
        let id = path.trim_start_matches(TASKS).to_string();
        let retry_after = self.sw.task_retry_after;
        let fails = self.sw.task_fails.clone();
        let Some(task) = self.tasks.get_mut(&id) else {
            return error(404, "Base.1.12.ResourceMissingAtURI", "No such task.", &[]);
        };
        if task.polls_left > 0 {
            task.polls_left -= 1;
            let mut r = reply(
                202,
                json!({"@odata.id": path, "Id": id, "TaskState": "Running", "PercentComplete": 50,
                "Messages": [{"MessageId": "TaskEvent.1.0.TaskStarted",
                "Message": format!("The task with Id '{id}' has started.")}]}),
            );
            if let Some(secs) = retry_after {
                r.headers.push(("Retry-After", secs.to_string()));
            }
            return r;
        }
        if let Some(message) = fails {
            return reply(
                200,
                json!({"@odata.id": path, "Id": id, "TaskState": "Exception", "TaskStatus": "Critical",
                "Messages": [{"MessageId": "IDRAC.2.9.SYS051", "Message": message}]}),
            );
        }
        if let Effect::BootCdOnce = task.effect {
            self.oem_virtual_cd = true;
            self.boot = ("Cd".to_string(), "Once".to_string());
            self.changed();
        }
        reply(
            200,
            json!({"@odata.id": path, "Id": id, "TaskState": "Completed", "TaskStatus": "OK",
            "Messages": [{"MessageId": "IDRAC.2.9.SYS053", "Message": "Successfully imported and applied Server Configuration Profile."}]}),
        )
    }

    fn nics(&self) -> Value {
        let members: Vec<Value> = (1..=self.sw.macs.len())
            .map(|n| json!({"@odata.id": format!("{SYSTEM}/EthernetInterfaces/NIC.Integrated.1-{n}-1")}))
            .collect();
        json!({"Members": members})
    }

    fn nic(&self, path: &str) -> Reply {
        let n: usize = path
            .rsplit('/')
            .next()
            .and_then(|id| id.trim_start_matches("NIC.Integrated.1-").split('-').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        match self.sw.macs.get(n.wrapping_sub(1)) {
            Some(mac) => reply(
                200,
                json!({"@odata.id": path, "MACAddress": mac, "PermanentMACAddress": mac}),
            ),
            None => error(404, "Base.1.12.ResourceMissingAtURI", "No such NIC.", &[]),
        }
    }

    fn manager(&self) -> Value {
        let v = self.vendor();
        let mut m = json!({
            "@odata.id": MANAGER, "Id": "iDRAC.Embedded.1", "ManagerType": "BMC",
            "Manufacturer": v.manufacturer(), "Model": v.manager_model(),
            "FirmwareVersion": v.firmware(),
        });
        if v.dell() {
            m["Actions"] = json!({"Oem": {"#OemManager.v1_4_0.OemManager#OemManager.ImportSystemConfiguration": {
                "target": IMPORT,
                "ShutdownType@Redfish.AllowableValues": ["Graceful", "Forced", "NoReboot"],
            }}});
        }
        if self.sw.log_entries.is_some() {
            m["LogServices"] = json!({"@odata.id": super::logs::collection()});
        }
        if self.sw.media_under == MediaUnder::Manager {
            m["VirtualMedia"] = json!({"@odata.id": format!("{MANAGER}/VirtualMedia")});
        }
        m
    }

    fn import(&mut self, body: &Value) -> Reply {
        let buffer = body["ImportBuffer"].as_str().unwrap_or_default();
        let wanted = "<SystemConfiguration><Component FQDD=\"iDRAC.Embedded.1\"><Attribute Name=\"ServerBoot.1#BootOnce\">Enabled</Attribute><Attribute Name=\"ServerBoot.1#FirstBootDevice\">VCD-DVD</Attribute></Component></SystemConfiguration>";
        if buffer != wanted || body["ShareParameters"]["Target"] != "ALL" {
            return error(400, "IDRAC.2.9.SYS041", "Unable to import the Server Configuration Profile because the ImportBuffer is invalid.", &["#/ImportBuffer"]);
        }
        if let Some((id, _)) = &self.sw.import_busy {
            if self.import_busy_left > 0 {
                self.import_busy_left -= 1;
                let message = match id.as_str() {
                    "LC068" => "Unable to complete the operation because pending configuration changes exist.",
                    _ => "Unable to complete the operation because a job is already running.",
                };
                return error(400, &format!("IDRAC.2.9.{id}"), message, &[]);
            }
        }
        self.new_task(Effect::BootCdOnce)
    }

    fn media_collection(&self) -> String {
        match self.sw.media_under {
            MediaUnder::Manager => format!("{MANAGER}/VirtualMedia"),
            MediaUnder::System => format!("{SYSTEM}/VirtualMedia"),
        }
    }

    /// The devices in iDRAC's order: older firmware lists RemovableDisk then CD, newer 1 (CD,
    /// DVD) then 2 (USBStick).
    fn media_paths(&self) -> Vec<String> {
        let c = self.media_collection();
        match self.sw.media_under {
            MediaUnder::Manager => vec![format!("{c}/RemovableDisk"), format!("{c}/CD")],
            MediaUnder::System => vec![format!("{c}/2"), format!("{c}/1")],
        }
    }

    fn cd_path(&self) -> String {
        match self.sw.media_under {
            MediaUnder::Manager => MANAGER_CD.to_string(),
            MediaUnder::System => SYSTEM_CD.to_string(),
        }
    }

    fn media_collection_body(&self) -> Value {
        let members: Vec<Value> = self
            .media_paths()
            .iter()
            .map(|p| json!({"@odata.id": p}))
            .collect();
        json!({"@odata.id": self.media_collection(), "Members": members})
    }

    fn media(&self, path: &str) -> Reply {
        let cd = path == self.cd_path();
        let second = !cd && self.second_cd();
        let (inserted, image) = match (cd, second) {
            (true, _) if !self.inserted && self.stale.is_some() => (true, json!(self.stale)),
            (true, _) => (self.inserted, json!(self.image)),
            (false, true) => (self.slot2.inserted, json!(self.slot2.image)),
            (false, false) => (false, Value::Null),
        };
        let mut m = json!({
            "@odata.id": path, "Id": path.rsplit('/').next(),
            "MediaTypes": match (cd, self.second_cd()) {
                (true, false) => json!(["CD", "DVD"]),
                (true, true) | (false, true) => json!(["CD", "DVD", "USBStick"]),
                (false, false) => json!(["USBStick"]),
            },
            "Inserted": inserted,
            "Image": image,
            "WriteProtected": true,
            "ConnectedVia": if inserted { "URI" } else { "NotConnected" },
        });
        if self.sw.media_actions {
            m["Actions"] = json!({
                "#VirtualMedia.InsertMedia": {"target": format!("{path}/Actions/VirtualMedia.InsertMedia")},
                "#VirtualMedia.EjectMedia": {"target": format!("{path}/Actions/VirtualMedia.EjectMedia")},
            });
        }
        self.with_etag(reply(200, m))
    }

    fn insert(&mut self, body: &Value) -> Reply {
        let Some(image) = body.get("Image").and_then(Value::as_str) else {
            return error(400, "Base.1.12.ActionParameterMissing", "The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.", &["#/Image"]);
        };
        if let Some(refusal) = self.refuse_insert(body) {
            return refusal;
        }
        if self.sw.insert_needs_protocol && body.get("TransferProtocolType").is_none() {
            return error(400, "Base.1.12.ActionParameterMissing", "The action VirtualMedia.InsertMedia requires the parameter TransferProtocolType to be present in the request body.", &["#/TransferProtocolType"]);
        }
        if self.sw.insert_needs_method && body.get("TransferMethod").is_none() {
            return reply(
                400,
                json!({"error": {"code": "Base.1.12.GeneralError", "message": "The parameter TransferMethod is required."}}),
            );
        }
        if self.inserted {
            return error(400, "IDRAC.2.9.VRM0012", "The requested operation cannot be performed because the virtual media is already in use.", &[]);
        }
        self.inserted = true;
        self.image = Some(image.to_string());
        self.stale = None;
        self.changed();
        reply(204, Value::Null)
    }

    fn eject(&mut self, raw: &[u8]) -> Reply {
        // iDRAC wants a JSON body, `{}`.
        if !serde_json::from_slice::<Value>(raw).is_ok_and(|v| v.is_object()) {
            return error(400, "Base.1.12.MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.", &[]);
        }
        if !self.inserted {
            return error(
                400,
                "IDRAC.2.9.VRM0009",
                "No Virtual Media devices are currently connected.",
                &[],
            );
        }
        self.inserted = false;
        self.image = None;
        self.changed();
        reply(204, Value::Null)
    }

    fn patch_media(&mut self, req: &Incoming, body: &Value) -> Reply {
        if let Some(r) = self.stale(req) {
            return r;
        }
        if let Some(inserted) = body.get("Inserted").and_then(Value::as_bool) {
            self.inserted = inserted;
        }
        if let Some(image) = body.get("Image") {
            self.image = image.as_str().map(str::to_string);
        }
        self.changed();
        reply(204, Value::Null)
    }
}

fn boot_of(boot: &Value, base: &(String, String)) -> (String, String) {
    let get = |k: &str, d: &str| boot.get(k).and_then(Value::as_str).unwrap_or(d).to_string();
    (
        get("BootSourceOverrideTarget", &base.0),
        get("BootSourceOverrideEnabled", &base.1),
    )
}
