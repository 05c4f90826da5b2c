//! IP allocation bookkeeping (issue #4 builds the pool/sharing/family
//! logic on top). Pure: no I/O, no kube client, not async.

pub mod freeset;
pub mod space;
