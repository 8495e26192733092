//! The `io` provider, built on the block layer's request tracepoints: `io:::start` fires when a
//! request is issued to its device driver (`block_rq_issue`) and `io:::done` when the device
//! completes it (`block_rq_complete`), both in whatever thread the kernel is running then, as in
//! DTrace. Their raw tracepoints carry the `struct request *`, which the D library's translators
//! (`bio.d`) turn into DTrace's `bufinfo_t` (`args[0]`) and `devinfo_t` (`args[1]`); `args[2]`, the
//! `fileinfo_t` of the file the I/O is for, is a null `struct file *` (its members read `<none>`):
//! a block request does not know the file it serves.
//!
//! `io:::wait-start`/`io:::wait-done` (a thread starting and ending a wait for a buffer) have no
//! tracepoint on Linux; [`unavailable`] says so.

use super::fbt::KERNEL_MODULE;
use super::{AttachPoint, Probe, ProbeArg, ProbeDesc};
use crate::capture::{ArgSource, Identity};
use crate::tracefs::EventFormat;
use std::collections::HashMap;

/// The native type of the raw tracepoints' first argument.
const REQUEST: &str = "struct request *";

/// `(probe name, block tracepoint)`.
const SPECS: &[(&str, &str)] = &[("start", "block_rq_issue"), ("done", "block_rq_complete")];

/// DTrace `io` probes this substrate cannot offer, with the reason.
pub fn unavailable(name: &str) -> Option<&'static str> {
    match name {
        "wait-start" | "wait-done" => Some(
            "the kernel has no tracepoint where a thread starts or ends waiting for block I/O \
             (needs fbt on submit_bio_wait)",
        ),
        _ => None,
    }
}

/// `args[]` of every `io` probe: `bufinfo_t *` and `devinfo_t *` translated from the request,
/// `fileinfo_t *` from a null file.
fn args() -> (Vec<ArgSource>, Vec<ProbeArg>) {
    let arg = |native: &str, dtype: &str| ProbeArg {
        native: native.into(),
        dtype: dtype.into(),
        copy: None,
    };
    (
        vec![ArgSource::RawArg(0), ArgSource::RawArg(0), ArgSource::Zero],
        vec![
            arg(REQUEST, "bufinfo_t *"),
            arg(REQUEST, "devinfo_t *"),
            arg("struct file *", "fileinfo_t *"),
        ],
    )
}

/// The `io` probes whose block tracepoints exist in `formats`.
pub fn probes(formats: &HashMap<(String, String), EventFormat>) -> Vec<Probe> {
    probes_where(|sys, ev| formats.contains_key(&(sys.to_string(), ev.to_string())))
}

/// The `io` probes whose block tracepoints `exists(subsystem, event)` says are there (their
/// formats are not needed).
pub fn probes_where(exists: impl Fn(&str, &str) -> bool) -> Vec<Probe> {
    SPECS
        .iter()
        .filter(|(_, tp)| exists("block", tp))
        .map(|(name, tp)| {
            let (sources, types) = args();
            Probe {
                desc: ProbeDesc::new("io", KERNEL_MODULE, "", name),
                args: types,
                attach: AttachPoint::RawTracepoint {
                    name: (*tp).into(),
                    args: sources,
                    conditions: Vec::new(),
                    identity: Identity::Current,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(id: u64) -> EventFormat {
        EventFormat {
            name: String::new(),
            id,
            common: Vec::new(),
            fields: Vec::new(),
            print_fmt: String::new(),
        }
    }

    #[test]
    fn probes_follow_the_block_tracepoints() {
        let mut formats = HashMap::new();
        formats.insert(("block".into(), "block_rq_issue".into()), format(1));
        let ps = probes(&formats);
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].desc, ProbeDesc::new("io", KERNEL_MODULE, "", "start"));
        let types: Vec<(&str, &str)> = ps[0]
            .args
            .iter()
            .map(|a| (a.native.as_str(), a.dtype.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("struct request *", "bufinfo_t *"),
                ("struct request *", "devinfo_t *"),
                ("struct file *", "fileinfo_t *")
            ]
        );
        match &ps[0].attach {
            AttachPoint::RawTracepoint { name, args, .. } => {
                assert_eq!(name, "block_rq_issue");
                assert_eq!(
                    args,
                    &[ArgSource::RawArg(0), ArgSource::RawArg(0), ArgSource::Zero]
                );
            }
            other => panic!("{other:?}"),
        }
        formats.insert(("block".into(), "block_rq_complete".into()), format(2));
        let names: Vec<String> = probes(&formats).into_iter().map(|p| p.desc.name).collect();
        assert_eq!(names, ["start", "done"]);
    }

    #[test]
    fn wait_probes_say_why_they_are_missing() {
        assert!(unavailable("wait-start").is_some_and(|r| r.contains("no tracepoint")));
        assert!(unavailable("wait-done").is_some());
        assert!(unavailable("start").is_none());
    }
}
