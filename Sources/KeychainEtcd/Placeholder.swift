// The etcd storage.
