"""ZooKeeper coordination (kazoo): every znode path in `zk_paths`, the connection in
`zookeeper`, the broker and topic registry in `broker_registry`, the seed's ZooKeeper
consumer groups (ids, owners, offsets) in `consumer_registry`."""
