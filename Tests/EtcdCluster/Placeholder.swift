// The etcd test cluster.
