//! The kernel's BTF objects: a loaded module's BTF is an object of its own, and a trampoline on one
//! of the module's functions names it (`attach_btf_obj_fd`) beside the function's id in the
//! module's split BTF. Objects are found by walking their ids and reading each one's name; the
//! descriptors found stay open for the life of the process (a few, one per module traced).

use super::sys::{self, cmd, BtfInfo, IdAttr, InfoAttr};
use crate::error::{LinuxError, Result};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

/// The most BTF objects walked (the kernel's and one per module).
const MAX_OBJECTS: usize = 1 << 16;

/// The descriptor of module `module`'s BTF object, opened once and kept.
pub fn module_btf_fd(module: &str) -> Result<i32> {
    static OPEN: Mutex<Option<HashMap<String, OwnedFd>>> = Mutex::new(None);
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    let open = open.get_or_insert_with(HashMap::new);
    if let Some(fd) = open.get(module) {
        return Ok(fd.as_raw_fd());
    }
    let fd = find(module)?;
    let raw = fd.as_raw_fd();
    open.insert(module.to_string(), fd);
    Ok(raw)
}

/// Walks the BTF objects for the kernel BTF named `module`.
fn find(module: &str) -> Result<OwnedFd> {
    let mut id = 0u32;
    for _ in 0..MAX_OBJECTS {
        let mut next = IdAttr {
            id,
            ..Default::default()
        };
        // SAFETY: `next` is BPF_BTF_GET_NEXT_ID's attribute, holding no pointers.
        match unsafe { sys::bpf(cmd::BTF_GET_NEXT_ID, &mut next) } {
            Ok(_) => id = next.next_id,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => break,
            Err(e) => return Err(LinuxError::from_io("listing the kernel's BTF objects", e)),
        }
        let mut by_id = IdAttr {
            id,
            ..Default::default()
        };
        // SAFETY: `by_id` is BPF_BTF_GET_FD_BY_ID's attribute, holding no pointers. An object
        // freed since it was listed is skipped.
        let Ok(fd) = (unsafe { sys::bpf_fd(cmd::BTF_GET_FD_BY_ID, &mut by_id, "BTF object") })
        else {
            continue;
        };
        let mut name = [0u8; 64];
        let mut info = BtfInfo {
            name: name.as_mut_ptr() as u64,
            name_len: name.len() as u32,
            ..Default::default()
        };
        let mut attr = InfoAttr {
            bpf_fd: fd.as_raw_fd() as u32,
            info_len: std::mem::size_of::<BtfInfo>() as u32,
            info: &mut info as *mut BtfInfo as u64,
        };
        // SAFETY: `info` and its name buffer outlive the call and are sized as declared.
        if unsafe { sys::bpf(cmd::OBJ_GET_INFO_BY_FD, &mut attr) }.is_err() {
            continue;
        }
        let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
        if info.kernel_btf != 0 && &name[..end] == module.as_bytes() {
            return Ok(fd);
        }
    }
    Err(LinuxError::Unavailable(format!(
        "the BTF object of module {module} (not loaded, or without BTF)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_that_is_not_loaded_has_no_btf_object() {
        if !crate::features::have_btf() {
            eprintln!("skipped: no kernel BTF");
            return;
        }
        match module_btf_fd("no_such_module_x") {
            Err(LinuxError::Unavailable(m)) => assert!(m.contains("no_such_module_x"), "{m}"),
            Err(e) => eprintln!("skipped: BTF objects cannot be listed here: {e}"),
            Ok(fd) => panic!("found a descriptor {fd} for a module that does not exist"),
        }
    }
}
