//! Fuzzes the ring-buffer record decoder against a layout with copies, the argument area, the
//! ancestors and both stacks, and one whose copy sized at the probe follows the fixed part.
#![no_main]
use dtrace_linux::capture::{AddrExpr, CaptureSpec, CopyRequest, MemKind, RecordLayout, decode_record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let spec = CaptureSpec {
        copies: vec![
            CopyRequest { addr: AddrExpr::arg(1), kind: MemKind::UserString, size: 64, size_arg: None },
            CopyRequest { addr: AddrExpr::arg(0), kind: MemKind::KernelBytes, size: 16, size_arg: None },
        ],
        kstack: Some(8),
        ustack: Some(8),
        execargs: Some(24),
        ancestors: true,
        ..CaptureSpec::new()
    };
    let layout = RecordLayout::for_spec(&spec, "fuzz").expect("valid spec");
    let _ = decode_record(data, |_| Some(&layout));
    let by_file = CaptureSpec { ustack_build_id: true, ..spec.clone() };
    let layout = RecordLayout::for_spec(&by_file, "fuzz").expect("valid spec");
    let _ = decode_record(data, |_| Some(&layout));
    // A copy sized at the probe, its bytes after the fixed part.
    let mut sized = spec;
    sized.copies[0] = CopyRequest { addr: AddrExpr::arg(1), kind: MemKind::UserBytes, size: 4096, size_arg: Some(2) };
    let layout = RecordLayout::for_spec_sized(&sized, "fuzz", dtrace_linux::capture::layout::SizedCopies::AtProbe)
        .expect("valid spec");
    let _ = decode_record(data, |_| Some(&layout));
});
