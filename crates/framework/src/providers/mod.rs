//! Providers that need no kernel help: `dtrace` (BEGIN, END, ERROR) and `profile` (`tick-N` and
//! `profile-N` driven by timers polled here).

pub mod dtrace;
pub mod profile;
