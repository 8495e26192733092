//! Where each CPU sits in the machine, from sysfs (`/sys/devices/system/cpu/cpuN/topology` and the
//! `nodeM` link of its NUMA node): the physical package and the node that D's `chip` and `lgrp`
//! (`curcpu->cpu_chip`, `curcpu->cpu_lgrp`) report, as DTrace for Linux reads them.

use std::path::Path;

use dtrace_framework::CpuPlace;

/// The places of CPUs `0..ncpus` under the default sysfs root; a CPU whose files cannot be read
/// is on chip 0, node 0 (a machine without NUMA has only node 0).
pub fn cpu_places(ncpus: u32) -> Vec<CpuPlace> {
    cpu_places_under(Path::new("/sys/devices/system/cpu"), ncpus)
}

/// [`cpu_places`] under another root (for tests).
pub fn cpu_places_under(root: &Path, ncpus: u32) -> Vec<CpuPlace> {
    (0..ncpus)
        .map(|cpu| {
            let dir = root.join(format!("cpu{cpu}"));
            let chip = std::fs::read_to_string(dir.join("topology/physical_package_id"))
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0);
            CpuPlace {
                chip,
                lgrp: numa_node(&dir).unwrap_or(0),
            }
        })
        .collect()
}

/// The number of the `nodeM` entry in a CPU's directory.
fn numa_node(dir: &Path) -> Option<u32> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        e.file_name()
            .to_str()?
            .strip_prefix("node")?
            .parse::<u32>()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_packages_and_nodes() {
        let root = std::env::temp_dir().join(format!("dtrace-topology-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (cpu, pkg, node) in [(0, "0\n", 0), (1, "1\n", 1)] {
            let d = root.join(format!("cpu{cpu}"));
            std::fs::create_dir_all(d.join("topology")).unwrap();
            std::fs::write(d.join("topology/physical_package_id"), pkg).unwrap();
            std::fs::create_dir_all(d.join(format!("node{node}"))).unwrap();
        }
        // cpu2 has no files: chip 0, node 0; a garbled package id is 0 too
        std::fs::create_dir_all(root.join("cpu3/topology")).unwrap();
        std::fs::write(root.join("cpu3/topology/physical_package_id"), "x").unwrap();
        let places = cpu_places_under(&root, 4);
        assert_eq!(
            places,
            vec![
                CpuPlace { chip: 0, lgrp: 0 },
                CpuPlace { chip: 1, lgrp: 1 },
                CpuPlace::default(),
                CpuPlace::default(),
            ]
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn this_machine_has_a_place_per_cpu() {
        assert_eq!(cpu_places(3).len(), 3);
    }
}
