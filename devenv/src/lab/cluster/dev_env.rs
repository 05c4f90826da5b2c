//! The dev-env's MetalLB configuration on a lab (a BGP or a layer2 pool
//! with its peers and advertisement), labelled so that a later dev-env
//! replaces it and `remove_dev_env_config` finds it.

use super::layout::{DEV_ENV_L2_V4, DEV_ENV_L2_V6};
use super::{LabCluster, client};
use crate::cluster::Cluster;
use anyhow::{Context, Result};
use std::time::Duration;

impl LabCluster {
    /// Creates (or replaces) the dev-env's BGP configuration: one BGPPeer
    /// per router address, the pool `dev-env-bgp` of the lab's families
    /// and a BGPAdvertisement; returns what it did, one line per object.
    pub fn apply_bgp_dev_env(&self) -> Result<Vec<String>> {
        let routers = self.bgp_routers();
        if routers.is_empty() {
            self.bgp_router()?;
        }
        let objects = crate::frr::objects(
            metallb_rs::api::DEFAULT_NAMESPACE,
            &routers,
            (crate::kind::cluster::DEV_ENV_LABEL, &self.name),
        );
        self.apply_dev_env(&objects)
    }

    /// Creates (or replaces) the dev-env's layer2 configuration: the pool
    /// `dev-env-l2` over [`DEV_ENV_L2_V4`] / [`DEV_ENV_L2_V6`] (the lab's
    /// families; addresses the e2e suites do not use) and an
    /// L2Advertisement of every pool; returns what it did, one line per
    /// object, and the pool's ranges.
    pub fn apply_l2_dev_env(&self) -> Result<(Vec<String>, Vec<String>)> {
        let node = self.lab.nodes.first().context("the lab has no node")?;
        let ranges: Vec<String> = [(false, DEV_ENV_L2_V4), (true, DEV_ENV_L2_V6)]
            .into_iter()
            .filter(|(v6, _)| node.addresses().iter().any(|a| a.is_ipv6() == *v6))
            .map(|(_, r)| r.to_owned())
            .collect();
        let parsed = ranges
            .iter()
            .map(|r| r.parse().map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()?;
        let objects = crate::kind::cluster::layer2_objects(&self.name, &parsed)?;
        Ok((self.apply_dev_env(&objects)?, ranges))
    }

    /// Makes `objects` the dev-env's configuration: deletes what an earlier
    /// dev-env left that is not among them, creates or replaces the rest
    /// (unchanged objects are not written).
    fn apply_dev_env(&self, objects: &[serde_json::Value]) -> Result<Vec<String>> {
        crate::kind::validate(objects)?;
        let label = format!("{}={}", crate::kind::cluster::DEV_ENV_LABEL, self.name);
        crate::runtime()?.block_on(async {
            let client = client(&self.kubeconfig).await?;
            let mut done = crate::kind::apply::delete_metallb_config_except(
                &client,
                metallb_rs::api::DEFAULT_NAMESPACE,
                &label,
                objects,
            )
            .await?
            .into_iter()
            .map(|d| format!("deleted {d}"))
            .collect::<Vec<_>>();
            done.extend(
                crate::kind::apply::create_or_replace_all(
                    &client,
                    objects,
                    Duration::from_secs(10),
                )
                .await?,
            );
            Ok(done)
        })
    }

    /// Deletes the MetalLB objects dev-env made on this lab (the BGP pool,
    /// peers and advertisement); returns `<Kind> <name>` of each.
    pub fn remove_dev_env_config(&self) -> Result<Vec<String>> {
        let label = format!("{}={}", crate::kind::cluster::DEV_ENV_LABEL, self.name);
        crate::runtime()?.block_on(async {
            let client = client(&self.kubeconfig).await?;
            crate::kind::apply::delete_metallb_config(
                &client,
                metallb_rs::api::DEFAULT_NAMESPACE,
                &label,
            )
            .await
        })
    }
}
