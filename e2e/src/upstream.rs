//! Upstream's e2e specs (MetalLB's `e2etest`, the ones its native-mode CI
//! runs: names without `FRR`, `FRR-MODE`, `FRRK8S-MODE`, `BFD`, `VRF` or
//! `DUALSTACK`) and which of ours checks the same setup and assertion, for
//! `cargo xtask e2e --list --upstream-map`. Upstream's names are ginkgo's
//! full texts (containers, table and entry joined by spaces); ours carry
//! the same words, so `--focus` with upstream's words finds them.
//!
//! The table holds every such spec of every file of upstream's `e2etest`,
//! grouped by file in upstream's order. Upstream's CI skips by a regex on
//! ginkgo's full text (containers and leaf; labels are not part of it);
//! two entries of `l2tests/l2.go` share each of two names, listed once.
//! Pure: [`render`] checks every name of ours against the registered
//! specs, so the table cannot point at a spec that was renamed or removed.

use crate::Spec;
use anyhow::{Result, bail};

/// How far one of ours covers an upstream spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Ours checks the same setup and assertion.
    Same(&'static str),
    /// Nothing of ours checks it, and why.
    Missing(&'static str),
}

/// One upstream spec and ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ported {
    /// Upstream's full name.
    pub upstream: &'static str,
    /// Ours.
    pub ours: Coverage,
}

const fn same(upstream: &'static str, ours: &'static str) -> Ported {
    Ported {
        upstream,
        ours: Coverage::Same(ours),
    }
}

const fn missing(upstream: &'static str, why: &'static str) -> Ported {
    Ported {
        upstream,
        ours: Coverage::Missing(why),
    }
}

/// Upstream's native-mode specs, in upstream's order.
pub const UPSTREAM: &[Ported] = &[
    // e2etest/bgptests/bgp.go
    same(
        "BGP A service of protocol load balancer should work with ETP=cluster IPV4",
        "BGP A service of protocol load balancer should work with ETP=cluster [IPV4]",
    ),
    same(
        "BGP A service of protocol load balancer should work with ETP=cluster IPV6",
        "BGP A service of protocol load balancer should work with ETP=cluster [IPV6]",
    ),
    same(
        "BGP A service of protocol load balancer should work with ETP=cluster IPV4 - request IPv4 via custom annotation",
        "BGP A service of protocol load balancer should work with ETP=cluster - request IPv4 via custom annotation [IPV4]",
    ),
    same(
        "BGP Service with ETP=cluster IPV4 - should not be announced from a node with a NetworkUnavailable condition",
        "BGP Service with ETP=cluster - should not be announced from a node with a NetworkUnavailable condition [IPV4]",
    ),
    same(
        "BGP A service of protocol load balancer should work with ETP=local IPV4",
        "BGP A service of protocol load balancer should work with ETP=local [IPV4]",
    ),
    same(
        "BGP A service of protocol load balancer should work with ETP=local IPV6",
        "BGP A service of protocol load balancer should work with ETP=local [IPV6]",
    ),
    same(
        "BGP A load balancer service should work with overlapping IPs IPV4",
        "BGP A load balancer service should work with overlapping IPs [IPV4]",
    ),
    same(
        "BGP A load balancer service should work with overlapping IPs IPV6",
        "BGP A load balancer service should work with overlapping IPs [IPV6]",
    ),
    same(
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes IPV4 - test AddressPool defined by address range",
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes - test AddressPool defined by address range [IPV4]",
    ),
    same(
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes IPV4 - test AddressPool defined by network prefix",
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes - test AddressPool defined by network prefix [IPV4]",
    ),
    same(
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes IPV6 - test AddressPool defined by address range",
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes - test AddressPool defined by address range [IPV6]",
    ),
    same(
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes IPV6 - test AddressPool defined by network prefix",
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes - test AddressPool defined by network prefix [IPV6]",
    ),
    same(
        "BGP configure peers with routerid and validate external containers are paired with nodes IPV4",
        "BGP configure peers with routerid and validate external containers are paired with nodes [IPV4]",
    ),
    same(
        "BGP configure peers with routerid and validate external containers are paired with nodes IPV6",
        "BGP configure peers with routerid and validate external containers are paired with nodes [IPV6]",
    ),
    same(
        "BGP validate external containers are paired with nodes IPV4 with Secret Ref set for BGPPeer CR",
        "BGP validate external containers are paired with nodes with Secret Ref set for BGPPeer CR [IPV4]",
    ),
    same(
        "BGP validate external containers are paired with nodes IPV6 with Secret Ref set for BGPPeer CR",
        "BGP validate external containers are paired with nodes with Secret Ref set for BGPPeer CR [IPV6]",
    ),
    same("BGP ServiceBGPStatus IPV4", "BGP ServiceBGPStatus [IPV4]"),
    same("BGP ServiceBGPStatus IPV6", "BGP ServiceBGPStatus [IPV6]"),
    same(
        "BGP validate configuration changes should work after subsequent configuration updates IPV4",
        "BGP validate configuration changes should work after subsequent configuration updates [IPV4]",
    ),
    same(
        "BGP validate configuration changes should work after subsequent configuration updates IPV6",
        "BGP validate configuration changes should work after subsequent configuration updates [IPV6]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - community and localpref",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - community and localpref [IPV4]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - localpref",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - localpref [IPV4]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - community",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - community [IPV4]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - community from CRD",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - community from CRD [IPV4]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - ip pool selector",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - ip pool selector [IPV4]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV6 - community and localpref",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - community and localpref [IPV6]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV6 - community",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - community [IPV6]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV6 - community from CRD",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - community from CRD [IPV6]",
    ),
    same(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV6 - localpref",
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated - localpref [IPV6]",
    ),
    same(
        "BGP validate configuration changes IPV4 - overlapping bgp advertisements union communities for the same prefix",
        "BGP validate configuration changes - overlapping bgp advertisements union communities for the same prefix [IPV4]",
    ),
    same(
        "BGP BGP advertisement updates of communities and localpref and aggregation length IPV4",
        "BGP BGP advertisement updates of communities and localpref and aggregation length [IPV4]",
    ),
    same(
        "BGP BGP advertisement updates of communities and localpref and aggregation length IPV6",
        "BGP BGP advertisement updates of communities and localpref and aggregation length [IPV6]",
    ),
    same(
        "BGP A service of protocol load balancer should work with two protocols IPV4",
        "BGP A service of protocol load balancer should work with two protocols [IPV4]",
    ),
    same(
        "BGP A service of protocol load balancer should work with two protocols IPV6",
        "BGP A service of protocol load balancer should work with two protocols [IPV6]",
    ),
    // e2etest/bgptests/bgp_multiprotocol.go and bgptests/unnummbered.go:
    // every spec there is DUALSTACK, FRR or BFD.
    // e2etest/bgptests/bgppeer_selector.go
    same(
        "BGP Peer Selector A service IP will not be advertised to peers outside the BGPAdvertisement peers list IPV4",
        "BGP Peer Selector A service IP will not be advertised to peers outside the BGPAdvertisement peers list [IPV4]",
    ),
    same(
        "BGP Peer Selector A service IP will not be advertised to peers outside the BGPAdvertisement peers list IPV6",
        "BGP Peer Selector A service IP will not be advertised to peers outside the BGPAdvertisement peers list [IPV6]",
    ),
    same(
        "BGP Peer Selector A service advertised through two different bgpadvertisements to two different peers IPV4",
        "BGP Peer Selector A service advertised through two different bgpadvertisements to two different peers [IPV4]",
    ),
    same(
        "BGP Peer Selector A service advertised through two different bgpadvertisements to two different peers IPV6",
        "BGP Peer Selector A service advertised through two different bgpadvertisements to two different peers [IPV6]",
    ),
    // e2etest/bgptests/metrics.go
    same(
        "BGP metrics metrics should be exposed by the controller IPV4 - Checking service",
        "BGP metrics metrics should be exposed by the controller - Checking service [IPV4]",
    ),
    same(
        "BGP metrics metrics should be exposed by the controller IPV6 - Checking service",
        "BGP metrics metrics should be exposed by the controller - Checking service [IPV6]",
    ),
    // e2etest/bgptests/node_selector.go
    same(
        "BGP Node Selector Two services, two distinct advertisements with different node selectors IPV4 - two on first, two on second",
        "BGP Node Selector Two services, two distinct advertisements with different node selectors - two on first, two on second [IPV4]",
    ),
    same(
        "BGP Node Selector Two services, two distinct advertisements with different node selectors IPV4 - one on first, two on second",
        "BGP Node Selector Two services, two distinct advertisements with different node selectors - one on first, two on second [IPV4]",
    ),
    same(
        "BGP Node Selector Two services, two distinct advertisements with different node selectors IPV4 - zero on first, two on second",
        "BGP Node Selector Two services, two distinct advertisements with different node selectors - zero on first, two on second [IPV4]",
    ),
    same(
        "BGP Node Selector Two services, two distinct advertisements with different node selectors IPV6 - one on first, two on second",
        "BGP Node Selector Two services, two distinct advertisements with different node selectors - one on first, two on second [IPV6]",
    ),
    same(
        "BGP Node Selector One service, one advertisement with node selector, labeling node IPV4",
        "BGP Node Selector One service, one advertisement with node selector, labeling node [IPV4]",
    ),
    same(
        "BGP Node Selector One service, one advertisement with node selector, labeling node IPV6",
        "BGP Node Selector One service, one advertisement with node selector, labeling node [IPV6]",
    ),
    same(
        "BGP Node Selector Two advertisements - updating one nodeSelector to non-matching withdraws its service without affecting the other IPV4",
        "BGP Node Selector Two advertisements - updating one nodeSelector to non-matching withdraws its service without affecting the other [IPV4]",
    ),
    same(
        "BGP Node Selector Two advertisements - updating one nodeSelector to non-matching withdraws its service without affecting the other IPV6",
        "BGP Node Selector Two advertisements - updating one nodeSelector to non-matching withdraws its service without affecting the other [IPV6]",
    ),
    same(
        "BGP Node Selector Peer selector IPV4 Should work with a limited set of nodes First to one, second to two",
        "BGP Node Selector Peer selector Should work with a limited set of nodes First to one, second to two [IPV4]",
    ),
    same(
        "BGP Node Selector Peer selector IPV4 Should work with a limited set of nodes First to one, second to one, third to three",
        "BGP Node Selector Peer selector Should work with a limited set of nodes First to one, second to one, third to three [IPV4]",
    ),
    same(
        "BGP Node Selector Peer selector IPV4 Should work with a limited set of nodes First to one, second to one, third to same as first",
        "BGP Node Selector Peer selector Should work with a limited set of nodes First to one, second to one, third to same as first [IPV4]",
    ),
    // e2etest/bgptests/service_selector.go
    same(
        "BGP Service Selector Pool and service selectors together IPV4",
        "BGP Service Selector Pool and service selectors together [IPV4]",
    ),
    same(
        "BGP Service Selector Pool and service selectors together IPV6",
        "BGP Service Selector Pool and service selectors together [IPV6]",
    ),
    same(
        "BGP Service Selector Multiple service selectors IPV4",
        "BGP Service Selector Multiple service selectors [IPV4]",
    ),
    same(
        "BGP Service Selector Multiple service selectors IPV6",
        "BGP Service Selector Multiple service selectors [IPV6]",
    ),
    same(
        "BGP Service Selector Service selector updates propagate to BGP routes by updating BGPAdvertisement ServiceSelectors IPV4",
        "BGP Service Selector Service selector updates propagate to BGP routes by updating BGPAdvertisement ServiceSelectors [IPV4]",
    ),
    same(
        "BGP Service Selector Service selector updates propagate to BGP routes by updating BGPAdvertisement ServiceSelectors IPV6",
        "BGP Service Selector Service selector updates propagate to BGP routes by updating BGPAdvertisement ServiceSelectors [IPV6]",
    ),
    same(
        "BGP Service Selector Service selector updates propagate to BGP routes by updating Service labels IPV4",
        "BGP Service Selector Service selector updates propagate to BGP routes by updating Service labels [IPV4]",
    ),
    same(
        "BGP Service Selector Service selector updates propagate to BGP routes by updating Service labels IPV6",
        "BGP Service Selector Service selector updates propagate to BGP routes by updating Service labels [IPV6]",
    ),
    same(
        "BGP Service Selector Service selectors with split aggregation length advertisements IPV4",
        "BGP Service Selector Service selectors with split aggregation length advertisements [IPV4]",
    ),
    same(
        "BGP Service Selector Service selectors with split aggregation length advertisements IPV6",
        "BGP Service Selector Service selectors with split aggregation length advertisements [IPV6]",
    ),
    same(
        "BGP Service Selector Overlapping BGP advertisements where selected service gets all communities and staged gets shared only IPV4",
        "BGP Service Selector Overlapping BGP advertisements where selected service gets all communities and staged gets shared only [IPV4]",
    ),
    same(
        "BGP Service Selector Overlapping BGP advertisements where selected service gets all communities and staged gets shared only IPV6",
        "BGP Service Selector Overlapping BGP advertisements where selected service gets all communities and staged gets shared only [IPV6]",
    ),
    same(
        "BGP Service Selector Non-overlapping BGP advertisements apply distinct communities by service selector IPV4",
        "BGP Service Selector Non-overlapping BGP advertisements apply distinct communities by service selector [IPV4]",
    ),
    same(
        "BGP Service Selector Non-overlapping BGP advertisements apply distinct communities by service selector IPV6",
        "BGP Service Selector Non-overlapping BGP advertisements apply distinct communities by service selector [IPV6]",
    ),
    // e2etest/configurationstatetests/configurationstate.go
    same(
        "ConfigurationState a single speaker should have invalid result when BGPPeer with nodeSelector references secret with wrong type",
        "ConfigurationState a single speaker should have invalid result when BGPPeer with nodeSelector references secret with wrong type",
    ),
    same(
        "ConfigurationState speaker should recover when missing community for BGPAdvertisement is created",
        "ConfigurationState speaker should recover when missing community for BGPAdvertisement is created",
    ),
    same(
        "ConfigurationState all ConfigurationStates should report valid with a valid BGP peer config",
        "ConfigurationState all ConfigurationStates should report valid with a valid BGP peer config",
    ),
    same(
        "ConfigurationState should self-heal after deletion",
        "ConfigurationState should self-heal after deletion",
    ),
    // e2etest/l2tests/assignment.go
    same(
        "IP Assignment IPV4 Assignment should remove the ip from a service assign it to a free one when changing the service type to clusterIP",
        "IP Assignment should remove the ip from a service and assign it to a free one when changing the service type to clusterIP [IPV4]",
    ),
    same(
        "IP Assignment IPV4 Assignment should remove the ip from a service assign it to a free one when deleting the service",
        "IP Assignment should release the IP when the service is deleted and hand it to a waiting service [IPV4]",
    ),
    same(
        "IP Assignment IPV4 Assignment should preseve the same external ip after controller restart",
        "IP Assignment should preseve the same external ip after controller restart [IPV4]",
    ),
    same(
        "IP Assignment IPV4 Assignment should reconsider services when sharing the ip and conditions change",
        "IP Assignment should reconsider services when sharing the ip and conditions change [IPV4]",
    ),
    same(
        "IP Assignment IPV4 removing pools removes all pools",
        "IP Assignment removing pools removes all pools [IPV4]",
    ),
    same(
        "IP Assignment IPV4 removing pools reallocates svc after deleting a pool",
        "IP Assignment removing pools reallocates svc after deleting a pool [IPV4]",
    ),
    same(
        "IP Assignment IPV4 - Validate service allocation in address pools with namespace",
        "IP Assignment allocation in address pools with namespace [IPV4]",
    ),
    same(
        "IP Assignment IPV4 - Validate service allocation in address pools with only priority",
        "IP Assignment allocation in address pools with only priority [IPV4]",
    ),
    same(
        "IP Assignment IPV4 - Validate service allocation in address pools with namespace and namespace labels",
        "IP Assignment allocation in address pools with namespace and namespace labels [IPV4]",
    ),
    same(
        "IP Assignment IPV4 - Validate service allocation in address pools with service label",
        "IP Assignment allocation in address pools with service label [IPV4]",
    ),
    same(
        "IP Assignment IPV4 - Validate service allocation in address pools with namespace and service label",
        "IP Assignment allocation in address pools with namespace and service label [IPV4]",
    ),
    same(
        "IP Assignment IPV4 - Validate service allocation in address pools with namespace with labels",
        "IP Assignment allocation in address pools with namespace with labels [IPV4]",
    ),
    // e2etest/l2tests/interface_selector.go
    same(
        "L2-interface selector Interface Selector Validate L2ServiceStatus interface",
        "L2-interface selector should announce from the selected interface only, with its MAC, and report it [IPV4]",
    ),
    same(
        "L2-interface selector Interface Selector Validate the LB IP's mac",
        "L2-interface selector should announce from the selected interface only, with its MAC, and report it [IPV4]",
    ),
    same(
        "L2-interface selector Interface Selector Modify L2 interface",
        "L2-interface selector Interface Selector Modify L2 interface [IPV4]",
    ),
    same(
        "L2-interface selector Interface Selector Specify not existing interfaces",
        "L2-interface selector should not announce from an interface that does not exist and emit announceFailed [IPV4]",
    ),
    same(
        "L2-interface selector Interface Selector Address pool connected with two L2 advertisements",
        "L2-interface selector should announce from both interfaces of two advertisements [IPV4]",
    ),
    same(
        "L2-interface selector Interface Selector node selector",
        "L2-interface selector Interface Selector node selector [IPV4]",
    ),
    // e2etest/l2tests/l2.go
    same(
        "L2 type=Loadbalancer should work for ExternalTrafficPolicy=Cluster",
        "L2 should work for ExternalTrafficPolicy=Cluster [IPV4]",
    ),
    same(
        "L2 type=Loadbalancer should process the status as L2ServiceStatus along with service",
        "L2 should process the status as L2ServiceStatus along with service [IPV4] [L2ServiceStatus]",
    ),
    same(
        "L2 type=Loadbalancer should work for ExternalTrafficPolicy=Local",
        "L2 should work for ExternalTrafficPolicy=Local [IPV4]",
    ),
    same(
        "L2 type=Loadbalancer IPV4 Should work with mixed protocol services",
        "L2 should work for mixed protocol services [IPV4]",
    ),
    same(
        "L2 type=Loadbalancer should not be announced from a node with a NetworkUnavailable condition",
        "L2 should not be announced from a node with NetworkUnavailable, and come back when it clears [IPV4]",
    ),
    same(
        "L2 type=Loadbalancer It should be work when adding NodeExcludeBalancers label to a node",
        "L2 should not be announced from a node excluded from external load balancers, and come back [IPV4]",
    ),
    same(
        "L2 validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes AddressPool defined by address range",
        "L2 validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes AddressPool defined by address range [IPV4]",
    ),
    same(
        "L2 validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes AddressPool defined by network prefix",
        "L2 should work with pools given as a CIDR [IPV4]",
    ),
    same(
        "L2 different services sharing the same ip should advertise from the same node IPV4",
        "L2 should announce services sharing an IP from the same node [IPV4]",
    ),
    same(
        "L2 different services sharing the same ip should advertise from the same node IPV6",
        "L2 should announce services sharing an IP from the same node [IPV6]",
    ),
    same(
        "L2 metrics should be exposed by the controller IPV4 - Checking service",
        "L2 metrics should be exposed by the controller - Checking service [IPV4]",
    ),
    same(
        "L2 metrics should be exposed by the controller IPV6 - Checking service",
        "L2 metrics should be exposed by the controller - Checking service [IPV6]",
    ),
    // Upstream has two entries of this name (autoAssign true and false).
    same(
        "L2 validate requesting a specific address pool for Loadbalancer service IPV4",
        "L2 validate requesting a specific address pool for Loadbalancer service [IPV4]",
    ),
    // Upstream has two entries of this name (autoAssign true and false).
    same(
        "L2 validate requesting a specific address pool for Loadbalancer service IPV6",
        "L2 validate requesting a specific address pool for Loadbalancer service [IPV6]",
    ),
    // e2etest/l2tests/loadbalancer_class.go
    same(
        "LoadBalancer class A service with loadbalancer class should not get an ip",
        "LoadBalancer class a service with loadbalancer class should not get an ip [IPV4]",
    ),
    // e2etest/l2tests/node_selector.go
    same(
        "L2 Node Selector should work selecting one node",
        "L2 Node Selector should work selecting one node [IPV4]",
    ),
    same(
        "L2 Node Selector should work with multiple node selectors",
        "L2 Node Selector should work with multiple node selectors [IPV4]",
    ),
    same(
        "L2 Node Selector should work when adding nodes",
        "L2 Node Selector should work when adding nodes [IPV4]",
    ),
    // e2etest/l2tests/preferred_node.go
    same(
        "L2 Preferred Node Selector should prefer the labeled node and fall back to the baseline election when the label is removed",
        "L2 Preferred Node Selector should prefer the labeled node and fall back to the baseline election when the label is removed [IPV4]",
    ),
    same(
        "L2 Preferred Node Selector should behave like the baseline advertisement when no node matches the preferred selector",
        "L2 Preferred Node Selector should behave like the baseline advertisement when no node matches the preferred selector [IPV4]",
    ),
    same(
        "L2 Preferred Node Selector should fail over when the preferred node becomes unschedulable and reclaim when it returns",
        "L2 Preferred Node Selector should fail over when the preferred node becomes unschedulable and reclaim when it returns [IPV4]",
    ),
    same(
        "L2 Preferred Node Selector should re-elect when the L2Advertisement spec changes at runtime",
        "L2 Preferred Node Selector should re-elect when the L2Advertisement spec changes at runtime [IPV4]",
    ),
    same(
        "L2 Preferred Node Selector should respect nodeSelectors as a hard filter while preferredNodeSelectors orders the eligible set",
        "L2 Preferred Node Selector should respect nodeSelectors as a hard filter while preferredNodeSelectors orders the eligible set [IPV4]",
    ),
    same(
        "L2 Preferred Node Selector should announce from the nodeSelectors set when it is disjoint from preferredNodeSelectors",
        "L2 Preferred Node Selector should announce from the nodeSelectors set when it is disjoint from preferredNodeSelectors [IPV4]",
    ),
    same(
        "L2 Preferred Node Selector should sum weights across multiple L2Advertisements targeting the same pool",
        "L2 Preferred Node Selector should sum weights across multiple L2Advertisements targeting the same pool [IPV4]",
    ),
    same(
        "L2 Preferred Node Selector should scope preferredNodeSelectors to services matching serviceSelectors",
        "L2 Preferred Node Selector should scope preferredNodeSelectors to services matching serviceSelectors [IPV4]",
    ),
    // e2etest/l2tests/service_selector.go
    same(
        "L2-ServiceSelector Pool and Service Selectors together should only advertise services matching both pool and service selectors",
        "L2-ServiceSelector Pool and Service Selectors together should only advertise services matching both pool and service selectors [IPV4]",
    ),
    same(
        "L2-ServiceSelector Service selector filters election candidate nodes should announce from exactly one node when both advertisements match the service",
        "L2-ServiceSelector Service selector filters election candidate nodes should announce from exactly one node when both advertisements match the service [IPV4]",
    ),
    same(
        "L2-ServiceSelector Service selector filters election candidate nodes should not announce when no advertisement matches both service and node",
        "L2-ServiceSelector Service selector filters election candidate nodes should not announce when no advertisement matches both service and node [IPV4]",
    ),
    same(
        "L2-ServiceSelector Service Selector should use OR logic for multiple selectors",
        "L2 should announce services matched by serviceSelectors from the selected nodes [IPV4]",
    ),
    // e2etest/l2tests/speaker_failover.go
    same(
        "L2 speaker failover should move L2 advertisement when the announcing node stops running a ready speaker",
        "L2 should move L2 advertisement when the announcing node stops running a ready speaker (SIGKILL), and back [IPV4]",
    ),
    // e2etest/netpoltests/networkpolicies.go
    missing(
        "Networkpolicies only allowed traffic",
        "the lab's pods share their node's network namespace and addresses, so a policy for one pod cannot be enforced without cutting the node's other pods",
    ),
    // e2etest/webhookstests/webhooks.go
    same(
        "Webhooks For IPAddressPool Should recognize overlapping addresses in two AddressPools",
        "Webhooks should refuse an IPAddressPool overlapping another, on create and on update",
    ),
    same(
        "Webhooks for BGPAdvertisement Should recognize invalid AggregationLength",
        "Webhooks should refuse a BGPAdvertisement whose aggregationLength is shorter than a pool's prefix, or set beside serviceSelectors",
    ),
    same(
        "Webhooks for BGPAdvertisement Should reject serviceSelectors with non-default aggregationLength",
        "Webhooks should refuse a BGPAdvertisement whose aggregationLength is shorter than a pool's prefix, or set beside serviceSelectors",
    ),
    same(
        "Webhooks For BGPPeer Should reject invalid BGPPeer IP address",
        "Webhooks should refuse a BGPPeer with an invalid address, or a second peer of one address on the same nodes",
    ),
    same(
        "Webhooks For Community reject a new invalid Community in legacy format",
        "Webhooks should refuse an invalid Community, on create and on update, and a duplicate alias",
    ),
    same(
        "Webhooks For Community reject a new invalid Community in large format",
        "Webhooks should refuse an invalid Community, on create and on update, and a duplicate alias",
    ),
    same(
        "Webhooks For Community reject an update to an invalid Community in legacy format",
        "Webhooks should refuse an invalid Community, on create and on update, and a duplicate alias",
    ),
    same(
        "Webhooks For Community reject an update to an invalid Community in large format",
        "Webhooks should refuse an invalid Community, on create and on update, and a duplicate alias",
    ),
    same(
        "Webhooks For Community reject Community duplications in legacy format",
        "Webhooks For Community reject Community duplications in legacy format",
    ),
    same(
        "Webhooks namespace validation Should reject creating IPAddressPool in a different namespace",
        "Webhooks should refuse creating each MetalLB kind outside the MetalLB namespace",
    ),
    same(
        "Webhooks namespace validation Should reject creating BGPPeer in a different namespace",
        "Webhooks should refuse creating each MetalLB kind outside the MetalLB namespace",
    ),
    same(
        "Webhooks namespace validation Should reject creating BGPAdvertisement in a different namespace",
        "Webhooks should refuse creating each MetalLB kind outside the MetalLB namespace",
    ),
    same(
        "Webhooks namespace validation Should reject creating L2Advertisement in a different namespace",
        "Webhooks should refuse creating each MetalLB kind outside the MetalLB namespace",
    ),
    same(
        "Webhooks namespace validation Should reject creating Community in a different namespace",
        "Webhooks should refuse creating each MetalLB kind outside the MetalLB namespace",
    ),
];

/// The mapping as lines `upstream -> ours` (`- (why)` where nothing of
/// ours checks it), then a count; fails when a name of ours is not among
/// `specs`.
pub fn render(table: &[Ported], specs: &[Spec]) -> Result<Vec<String>> {
    let ours: std::collections::BTreeSet<String> = specs.iter().map(Spec::full_name).collect();
    let mut lines = Vec::new();
    let mut same = 0;
    for p in table {
        let line = match p.ours {
            Coverage::Same(name) if !ours.contains(name) => {
                bail!(
                    "the upstream map names {name:?} for {:?}, which is no spec of ours",
                    p.upstream
                )
            }
            Coverage::Same(name) => {
                same += 1;
                format!("{} -> {name}", p.upstream)
            }
            Coverage::Missing(why) => format!("{} -> - ({why})", p.upstream),
        };
        lines.push(line);
    }
    lines.push(format!("{same} of {} upstream specs mapped", table.len()));
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_the_map_names_exists() {
        let lines = render(UPSTREAM, &crate::suites::all()).expect("the map names real specs");
        assert_eq!(lines.len(), UPSTREAM.len() + 1);
        assert!(lines.iter().any(|l| l
            == "BGP A service of protocol load balancer should work with ETP=cluster IPV4 -> BGP A service of protocol load balancer should work with ETP=cluster [IPV4]"));
    }

    #[test]
    fn upstream_names_appear_once_and_skip_what_native_ci_skips() {
        let mut seen = std::collections::BTreeSet::new();
        for p in UPSTREAM {
            assert!(seen.insert(p.upstream), "{} twice", p.upstream);
            for skipped in ["FRR", "BFD", "VRF", "DUALSTACK"] {
                assert!(!p.upstream.contains(skipped), "{}", p.upstream);
            }
        }
    }

    #[test]
    fn a_renamed_spec_of_ours_is_an_error() {
        fn pass(_: &crate::Ctx) -> Result<()> {
            Ok(())
        }
        let table = [same("BGP x IPV4", "BGP x [IPV4]")];
        let specs = [Spec::new("BGP", "y", &["IPV4"], pass)];
        let err = render(&table, &specs).expect_err("no such spec");
        assert!(err.to_string().contains("BGP x [IPV4]"), "{err}");
        let specs = [Spec::new("BGP", "x", &["IPV4"], pass)];
        assert_eq!(
            render(&table, &specs).expect("maps"),
            ["BGP x IPV4 -> BGP x [IPV4]", "1 of 1 upstream specs mapped"]
        );
    }
}
