// Keystone's C boundary to fprintd (net.reactivated.Fprint) over GDBus. Plain C types only: GLib stays here.
#ifndef KEYSTONE_CFPRINTD_H
#define KEYSTONE_CFPRINTD_H
#endif
