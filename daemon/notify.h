/* Readiness and shutdown notices to systemd (Type=notify), sd_notify(3)'s protocol. */
#ifndef HP_NOTIFY_H
#define HP_NOTIFY_H

/* Sends state ("READY=1", "STOPPING=1", "STATUS=...") to $NOTIFY_SOCKET. Returns 1 when sent, 0 when
 * NOTIFY_SOCKET is unset (not under systemd: nothing to do), -errno on failure. */
int hp_notify(const char *state);

#endif
