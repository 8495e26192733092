//! Memory captured with a probe firing: what a provider copied from the traced system when the probe
//! fired (stage 1 of DESIGN §4: the eBPF program captures the bytes a clause will read), offered to the
//! DIF interpreter through its `Memory` trait. Reads inside a captured region succeed; anything else
//! faults with `BadAddr` at the address, as DTrace does for unmapped memory. Writes (`copyout`) are
//! refused: captured memory is a copy, and writing the traced process belongs to the `linux` layer.

use dtrace_dif::vm::{FaultKind, Memory};

/// One captured range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// Address of the first byte.
    pub addr: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Whether it is user memory (read by `copyin*` and `uld*`), else kernel memory.
    pub user: bool,
}

/// Memory captured with one firing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedMemory {
    regions: Vec<Region>,
}

impl CapturedMemory {
    /// No memory.
    pub fn new() -> CapturedMemory {
        CapturedMemory::default()
    }

    /// Adds a captured range.
    pub fn add(&mut self, addr: u64, bytes: Vec<u8>, user: bool) {
        self.regions.push(Region { addr, bytes, user });
    }

    /// The captured ranges.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    fn read(&self, addr: u64, buf: &mut [u8], user: bool) -> Result<(), FaultKind> {
        let len = buf.len() as u64;
        for r in self.regions.iter().filter(|r| r.user == user) {
            let Some(off) = addr.checked_sub(r.addr) else {
                continue;
            };
            if off
                .checked_add(len)
                .is_some_and(|end| end <= r.bytes.len() as u64)
            {
                let off = off as usize;
                buf.copy_from_slice(&r.bytes[off..off + buf.len()]);
                return Ok(());
            }
        }
        Err(FaultKind::BadAddr)
    }
}

impl Memory for CapturedMemory {
    fn read_kernel(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind> {
        self.read(addr, buf, false)
    }

    fn read_user(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind> {
        self.read(addr, buf, true)
    }

    fn write_user(&mut self, _addr: u64, _data: &[u8]) -> Result<(), FaultKind> {
        Err(FaultKind::UPriv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_regions_only() {
        let mut m = CapturedMemory::new();
        m.add(0x1000, b"hello\0".to_vec(), true);
        m.add(0x2000, vec![1, 2, 3, 4], false);
        let mut b = [0u8; 5];
        m.read_user(0x1000, &mut b).unwrap();
        assert_eq!(&b, b"hello");
        let mut b = [0u8; 2];
        m.read_user(0x1004, &mut b).unwrap();
        assert_eq!(&b, b"o\0");
        assert_eq!(m.read_user(0x1005, &mut b), Err(FaultKind::BadAddr));
        assert_eq!(m.read_kernel(0x1000, &mut b), Err(FaultKind::BadAddr));
        m.read_kernel(0x2002, &mut b).unwrap();
        assert_eq!(b, [3, 4]);
        assert_eq!(m.read_kernel(u64::MAX, &mut b), Err(FaultKind::BadAddr));
        assert_eq!(m.read_kernel(0, &mut b), Err(FaultKind::BadAddr));
        assert_eq!(m.write_user(0x1000, b"x"), Err(FaultKind::UPriv));
    }
}
