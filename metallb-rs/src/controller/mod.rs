//! The controller: assigns addresses from IPAddressPools to LoadBalancer
//! services. [`converge`] decides per service (pure), [`service`] reads
//! Services, [`run`] is the only part that talks to the API.

pub mod converge;
pub mod run;
pub mod service;
