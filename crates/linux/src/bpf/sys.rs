//! The bpf(2) system call: command numbers, the parts of `union bpf_attr` we use, and a wrapper that
//! returns owned file descriptors. Everything unsafe about talking to the BPF subsystem lives here.

use crate::error::{LinuxError, Result};
use std::os::fd::{FromRawFd, OwnedFd};

/// `enum bpf_cmd` values we use.
#[allow(missing_docs)]
pub mod cmd {
    pub const MAP_CREATE: u32 = 0;
    pub const MAP_LOOKUP_ELEM: u32 = 1;
    pub const MAP_UPDATE_ELEM: u32 = 2;
    pub const MAP_DELETE_ELEM: u32 = 3;
    pub const MAP_GET_NEXT_KEY: u32 = 4;
    pub const PROG_LOAD: u32 = 5;
    pub const PROG_TEST_RUN: u32 = 10;
    pub const OBJ_GET_INFO_BY_FD: u32 = 15;
    pub const RAW_TRACEPOINT_OPEN: u32 = 17;
    pub const BTF_LOAD: u32 = 18;
    pub const BTF_GET_FD_BY_ID: u32 = 19;
    pub const BTF_GET_NEXT_ID: u32 = 23;
    pub const LINK_CREATE: u32 = 28;
}

/// `enum bpf_map_type` values we use.
#[allow(missing_docs)]
pub mod map_type {
    pub const HASH: u32 = 1;
    pub const ARRAY: u32 = 2;
    pub const PROG_ARRAY: u32 = 3;
    pub const LRU_HASH: u32 = 9;
    pub const PERCPU_HASH: u32 = 5;
    pub const PERCPU_ARRAY: u32 = 6;
    pub const ARRAY_OF_MAPS: u32 = 12;
    pub const STACK_TRACE: u32 = 7;
    pub const RINGBUF: u32 = 27;
}

/// `enum bpf_prog_type` values we use.
#[allow(missing_docs)]
pub mod prog_type {
    pub const KPROBE: u32 = 2;
    pub const TRACEPOINT: u32 = 5;
    pub const PERF_EVENT: u32 = 7;
    pub const RAW_TRACEPOINT: u32 = 17;
    pub const TRACING: u32 = 26;
}

/// `enum bpf_attach_type` values we use.
#[allow(missing_docs)]
pub mod attach_type {
    pub const TRACE_RAW_TP: u32 = 23;
    pub const TRACE_FENTRY: u32 = 24;
    pub const TRACE_FEXIT: u32 = 25;
    pub const TRACE_KPROBE_MULTI: u32 = 42;
    pub const TRACE_UPROBE_MULTI: u32 = 48;
}

/// `union bpf_attr` for `BPF_MAP_CREATE` (the prefix we fill).
#[repr(C)]
#[derive(Default)]
pub struct MapCreateAttr {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub inner_map_fd: u32,
    pub numa_node: u32,
    pub map_name: [u8; 16],
    pub map_ifindex: u32,
    pub btf_fd: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    pub btf_vmlinux_value_type_id: u32,
    pub map_extra: u64,
}

/// `union bpf_attr` for the element commands.
#[repr(C)]
#[derive(Default)]
pub struct MapElemAttr {
    pub map_fd: u32,
    pub pad: u32,
    pub key: u64,
    pub value: u64,
    pub flags: u64,
}

/// `union bpf_attr` for `BPF_PROG_LOAD` (the prefix we fill). It ends at a field's end, not
/// in padding: the kernel reads every byte it is given, and `Default` zeroes fields, not the
/// holes between them (a hole after `attach_btf_obj_fd` was the kernel's `core_relo_cnt`, so a
/// load was refused, EINVAL and no log, whenever the stack there held a non-zero byte).
#[repr(C)]
#[derive(Default)]
pub struct ProgLoadAttr {
    pub prog_type: u32,
    pub insn_cnt: u32,
    pub insns: u64,
    pub license: u64,
    pub log_level: u32,
    pub log_size: u32,
    pub log_buf: u64,
    pub kern_version: u32,
    pub prog_flags: u32,
    pub prog_name: [u8; 16],
    pub prog_ifindex: u32,
    pub expected_attach_type: u32,
    pub prog_btf_fd: u32,
    pub func_info_rec_size: u32,
    pub func_info: u64,
    pub func_info_cnt: u32,
    pub line_info_rec_size: u32,
    pub line_info: u64,
    pub line_info_cnt: u32,
    pub attach_btf_id: u32,
    /// The BTF object `attach_btf_id` is in (a module's); 0 for the kernel's.
    pub attach_btf_obj_fd: u32,
    /// CO-RE relocations given (none: we relocate nothing).
    pub core_relo_cnt: u32,
}

/// `union bpf_attr` for `BPF_RAW_TRACEPOINT_OPEN`.
#[repr(C)]
#[derive(Default)]
pub struct RawTpAttr {
    pub name: u64,
    pub prog_fd: u32,
    pub pad: u32,
}

/// `union bpf_attr` for `BPF_LINK_CREATE` of a `BPF_TRACE_UPROBE_MULTI` link.
#[repr(C)]
#[derive(Default)]
pub struct UprobeMultiAttr {
    pub prog_fd: u32,
    pub target_fd: u32,
    pub attach_type: u32,
    pub link_flags: u32,
    /// NUL-terminated path of the object.
    pub path: u64,
    /// `cnt` u64 file offsets.
    pub offsets: u64,
    /// `cnt` u64 semaphore offsets (0: none), or 0.
    pub ref_ctr_offsets: u64,
    /// `cnt` u64 cookies (`bpf_get_attach_cookie`), or 0.
    pub cookies: u64,
    pub cnt: u32,
    /// `BPF_F_UPROBE_MULTI_RETURN` (1) for return probes.
    pub flags: u32,
    /// Only this process (0: every process).
    pub pid: u32,
    pub pad: u32,
}

/// `union bpf_attr` for `BPF_LINK_CREATE` of a `BPF_TRACE_KPROBE_MULTI` link.
#[repr(C)]
#[derive(Default)]
pub struct KprobeMultiAttr {
    pub prog_fd: u32,
    pub target_fd: u32,
    pub attach_type: u32,
    pub link_flags: u32,
    /// `BPF_F_KPROBE_MULTI_RETURN` (1) for return probes.
    pub flags: u32,
    pub cnt: u32,
    /// `cnt` pointers to NUL-terminated function names.
    pub syms: u64,
    /// `cnt` u64 addresses (instead of `syms`), or 0.
    pub addrs: u64,
    /// `cnt` u64 cookies (`bpf_get_attach_cookie`), or 0.
    pub cookies: u64,
}

/// `union bpf_attr` for `BPF_PROG_TEST_RUN`.
#[repr(C)]
#[derive(Default)]
pub struct TestRunAttr {
    pub prog_fd: u32,
    pub retval: u32,
    pub data_size_in: u32,
    pub data_size_out: u32,
    pub data_in: u64,
    pub data_out: u64,
    pub repeat: u32,
    pub duration: u32,
    pub ctx_size_in: u32,
    pub ctx_size_out: u32,
    pub ctx_in: u64,
    pub ctx_out: u64,
    pub flags: u32,
    pub cpu: u32,
    pub batch_size: u32,
    pub pad: u32,
}

/// `union bpf_attr` for `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C)]
#[derive(Default)]
pub struct InfoAttr {
    pub bpf_fd: u32,
    pub info_len: u32,
    pub info: u64,
}

/// `union bpf_attr` for `BPF_BTF_GET_NEXT_ID` (`id`: the id to start after) and
/// `union bpf_attr` for `BPF_BTF_LOAD` (the prefix we fill).
#[repr(C)]
#[derive(Default)]
pub struct BtfLoadAttr {
    pub btf: u64,
    pub btf_log_buf: u64,
    pub btf_size: u32,
    pub btf_log_size: u32,
    pub btf_log_level: u32,
    pub pad: u32,
}

/// `BPF_BTF_GET_FD_BY_ID` (`id`: the object's).
#[repr(C)]
#[derive(Default)]
pub struct IdAttr {
    pub id: u32,
    pub next_id: u32,
    pub open_flags: u32,
}

/// `struct bpf_btf_info`, as `BPF_OBJ_GET_INFO_BY_FD` fills it for a BTF object.
#[repr(C)]
#[derive(Default)]
pub struct BtfInfo {
    pub btf: u64,
    pub btf_size: u32,
    pub id: u32,
    pub name: u64,
    pub name_len: u32,
    pub kernel_btf: u32,
}

/// Calls bpf(2) with `attr`; returns the non-negative result or the errno as an `io::Error`.
///
/// # Safety
/// `attr` must be the attribute structure `cmd` expects, and every pointer inside it must be valid for
/// the kernel to read or write for the duration of the call.
pub unsafe fn bpf<T>(cmd: u32, attr: &mut T) -> std::io::Result<i64> {
    // SAFETY: the caller guarantees `attr` matches `cmd`; size is the structure's own size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Calls bpf(2) for a command that returns a new file descriptor.
///
/// # Safety
/// As for [`bpf`].
pub unsafe fn bpf_fd<T>(cmd: u32, attr: &mut T, what: &str) -> Result<OwnedFd> {
    // SAFETY: forwarded contract.
    let fd = unsafe { bpf(cmd, attr) }.map_err(|e| LinuxError::from_io(what, e))?;
    // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Copies `name` into a 16-byte object-name field, keeping only the characters the kernel accepts.
pub fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (dst, b) in out.iter_mut().zip(
        name.bytes()
            .filter(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
            .take(15),
    ) {
        *dst = b;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_the_kernel_abi() {
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        // No attribute structure ends in padding the kernel would read as a field.
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, core_relo_cnt), 116);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 120);
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 72);
        assert_eq!(std::mem::size_of::<RawTpAttr>(), 16);
        assert_eq!(std::mem::size_of::<UprobeMultiAttr>(), 64);
        assert_eq!(std::mem::size_of::<KprobeMultiAttr>(), 48);
        assert_eq!(std::mem::size_of::<TestRunAttr>(), 80);
        assert_eq!(std::mem::size_of::<InfoAttr>(), 16);
        assert_eq!(std::mem::size_of::<BtfLoadAttr>(), 32);
        assert_eq!(std::mem::size_of::<IdAttr>(), 12);
        assert_eq!(std::mem::offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(std::mem::offset_of!(MapCreateAttr, map_extra), 64);
        assert_eq!(std::mem::offset_of!(TestRunAttr, ctx_in), 48);
        assert_eq!(std::mem::offset_of!(TestRunAttr, flags), 64);
        assert_eq!(std::mem::offset_of!(UprobeMultiAttr, path), 16);
        assert_eq!(std::mem::offset_of!(UprobeMultiAttr, cnt), 48);
        assert_eq!(std::mem::offset_of!(UprobeMultiAttr, pid), 56);
        assert_eq!(std::mem::offset_of!(KprobeMultiAttr, flags), 16);
        assert_eq!(std::mem::offset_of!(KprobeMultiAttr, syms), 24);
        assert_eq!(std::mem::offset_of!(KprobeMultiAttr, cookies), 40);
    }

    #[test]
    fn object_names_are_sanitized_and_bounded() {
        let n = object_name("dt-ring buffer/for:everything");
        assert_eq!(&n[..15], b"dtringbufferfor");
        assert_eq!(n[15], 0);
    }
}
