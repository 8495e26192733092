//! The `sdt` provider: every kernel tracepoint as `sdt:<subsystem>::<event>`, its arguments the
//! event's own fields (at most 8), typed from the format file.

use super::{field_arg, AttachPoint, Probe, ProbeDesc};
use crate::capture::Identity;
use crate::tracefs::EventFormat;
use std::collections::HashMap;

/// One `sdt` probe per tracepoint in `formats`.
pub fn probes(formats: &HashMap<(String, String), EventFormat>) -> Vec<Probe> {
    let mut keys: Vec<&(String, String)> = formats.keys().collect();
    keys.sort();
    keys.into_iter()
        .filter_map(|k| formats.get(k).map(|f| (k, f)))
        .map(|((sys, ev), f)| probe(sys, ev, f))
        .collect()
}

/// `sdt:<sys>::<ev>`, from the event's format.
pub fn probe(sys: &str, ev: &str, f: &EventFormat) -> Probe {
    let (args, types): (Vec<_>, Vec<_>) = f.fields.iter().take(8).map(field_arg).unzip();
    Probe {
        desc: ProbeDesc::new("sdt", sys, "", ev),
        args: types,
        attach: AttachPoint::Tracepoint {
            subsystem: sys.to_string(),
            event: ev.to_string(),
            id: f.id,
            args,
            conditions: Vec::new(),
            identity: Identity::Current,
            return_event: None,
            syscall_return: false,
            syscall: None,
        },
    }
}
