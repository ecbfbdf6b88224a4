//! The I/O path of the GPU reads: which one ([`compat`], KvikIO's compat mode), POSIX `pread`s
//! into pinned host memory ([`posix`]) and cuFile reads into device memory ([`cufile`]).

pub(crate) mod compat;
pub(crate) mod cufile;
pub(crate) mod posix;
