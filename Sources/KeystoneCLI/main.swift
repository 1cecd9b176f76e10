print("keystone: not yet built")
