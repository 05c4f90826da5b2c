//! The controller: assigns addresses from IPAddressPools to LoadBalancer
//! services. [`converge`] decides per service (pure), [`run`] is the only
//! part that talks to the API. Services are read through [`crate::service`].

pub mod converge;
pub mod run;
