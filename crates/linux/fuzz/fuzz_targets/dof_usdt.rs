//! Fuzzes the reading of USDT providers from a `.SUNW_dof` section and of the is-enabled code its
//! sites call (the input is both the DOF and the object's bytes).
#![no_main]
use dtrace_linux::catalog::{dof_usdt, usdt::FlatImage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let image = FlatImage {
        base: 0,
        bytes: data.to_vec(),
    };
    let _ = dof_usdt::sites(data, &image);
    for at in (0..data.len() as u64).step_by(7).take(64) {
        let _ = dof_usdt::semaphore_of(&image, at);
    }
});
