/*
 * Network constants of DTrace's D library, with the values of the Linux ABI: the address
 * families inet_ntop() takes (<linux/socket.h>) and the hardware types of link-layer addresses
 * (<linux/if_arp.h>).
 */

inline int AF_INET = 2;
inline int AF_INET6 = 10;

inline int ARPHRD_NETROM = 0;
inline int ARPHRD_ETHER = 1;
inline int ARPHRD_EETHER = 2;
inline int ARPHRD_AX25 = 3;
inline int ARPHRD_PRONET = 4;
inline int ARPHRD_CHAOS = 5;
inline int ARPHRD_IEEE802 = 6;
inline int ARPHRD_ARCNET = 7;
inline int ARPHRD_APPLETLK = 8;
inline int ARPHRD_DLCI = 15;
inline int ARPHRD_ATM = 19;
inline int ARPHRD_METRICOM = 23;
inline int ARPHRD_IEEE1394 = 24;
inline int ARPHRD_EUI64 = 27;
inline int ARPHRD_INFINIBAND = 32;
inline int ARPHRD_LOOPBACK = 772;
inline int ARPHRD_NONE = 0xfffe;
inline int ARPHRD_VOID = 0xffff;
