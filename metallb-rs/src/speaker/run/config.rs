//! Reloading the configuration and the interface exclusions.

use super::*;

impl Runner {
    /// Rebuilds the configuration; true when it changed and was applied.
    pub(super) async fn reload_config(&mut self) -> bool {
        let s = &self.stores;
        let res = s
            .config
            .resources(s.nodes.state().iter().map(|o| (**o).clone()).collect());
        let me = s.nodes.get(&ObjectRef::new(&self.opts.node));
        let mine =
            crate::config::for_node(&res, me.as_ref().map_or(&BTreeMap::new(), |n| n.labels()));
        match Config::build(
            &mine,
            &ConfigOptions {
                namespace: self.opts.namespace.clone(),
            },
        ) {
            Ok(cfg) => {
                self.config_state.valid(&cfg.warnings).await;
                if self.config.as_ref() == Some(&cfg) {
                    return false;
                }
                tracing::info!(
                    pools = cfg.pools.len(),
                    l2_advertisements = cfg.l2_advertisements.len(),
                    "configuration loaded"
                );
                self.config = Some(cfg);
                // Winners were chosen under the old advertisements.
                self.elected.clear();
                true
            }
            Err(errors) => {
                self.config_state.invalid(errors.to_string()).await;
                false
            }
        }
    }

    /// Reads the exclusion list and the interfaces; updates the
    /// responders. True when the eligible set changed.
    pub(super) async fn rescan_interfaces(&mut self) -> bool {
        let patterns = self.exclusion_patterns();
        if patterns != self.exclusions.0 {
            match Exclusions::new(&patterns) {
                Ok(ex) => {
                    tracing::info!(patterns = ?patterns, "interface exclusions");
                    self.exclusions = (patterns, ex);
                }
                Err(e) => {
                    tracing::error!(configmap = EXCLUDE_CONFIGMAP, error = %e, "keeping the previous interface exclusions")
                }
            }
        }
        let listed = match iface::list() {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "could not list interfaces");
                return false;
            }
        };
        let eligible = iface::eligible(&listed, &self.exclusions.1);
        let before = self.announcer.interfaces().to_vec();
        let changes = self.announcer.update_interfaces(eligible).await;
        for c in &changes {
            tracing::info!("{c}");
        }
        self.announcer.interfaces() != before.as_slice()
    }

    /// The exclusion patterns: the ConfigMap's list, or upstream's defaults.
    pub(super) fn exclusion_patterns(&self) -> Vec<String> {
        let cm = self
            .stores
            .configmaps
            .get(&ObjectRef::new(EXCLUDE_CONFIGMAP).within(&self.opts.namespace));
        let Some(text) = cm
            .as_ref()
            .and_then(|c| c.data.as_ref())
            .and_then(|d| d.get(EXCLUDE_KEY))
        else {
            return iface::DEFAULT_EXCLUDES
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
        };
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Excludes {
            announced_interfaces_to_exclude: Vec<String>,
        }
        match serde_yaml::from_str::<Excludes>(text) {
            Ok(e) => e.announced_interfaces_to_exclude,
            Err(e) => {
                tracing::error!(configmap = EXCLUDE_CONFIGMAP, error = %e, "invalid {EXCLUDE_KEY}: expected `announcedInterfacesToExclude: [regex, ...]`; keeping the previous list");
                self.exclusions.0.clone()
            }
        }
    }
}
