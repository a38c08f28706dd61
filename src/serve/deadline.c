/* The request deadline of txc serve: a request must arrive whole (its
 * headers and its body) within --timeout seconds of the connection's start
 * or of the end of its previous request. libmicrohttpd's connection
 * timeout (MHD_OPTION_CONNECTION_TIMEOUT) only closes a connection that
 * sends nothing for that long: a client that trickles a byte now and then
 * ("slowloris") would hold its connection, and its thread, forever.
 * Every connection is tracked from libmicrohttpd's connection notifications
 * (MHD_OPTION_NOTIFY_CONNECTION); a watchdog thread shuts down the socket
 * of one still receiving past its deadline (shutdown(2): libmicrohttpd then
 * sees the connection fail and closes it itself). A connection being
 * answered (a plain response, a stream) is not bound by it. */
#include "serve/serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#define WATCH_MS 100

struct serve_watch {
    int fd;
    bool receiving;      /* between the start of a request and its last byte */
    bool shut;           /* shut down once */
    bool linked;         /* in srv->watch_head's list */
    double t_start_ms;   /* when the request began (the connection, or the previous request's end) */
    struct serve_watch *prev, *next;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void serve_conn_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    txc_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        serve_watch *w = calloc(1, sizeof *w);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = w;
        if (!w || !ci)
            return; /* not watched: the idle timeout still applies */
        w->fd = ci->connect_fd;
        w->receiving = true;
        w->t_start_ms = now_ms();
        pthread_mutex_lock(&srv->watch_mu);
        w->linked = true;
        w->next = srv->watch_head;
        if (w->next)
            w->next->prev = w;
        srv->watch_head = w;
        pthread_mutex_unlock(&srv->watch_mu);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        /* (before libmicrohttpd closes the socket: the watchdog never shuts down a reused fd) */
        serve_watch *w = *socket_context;
        *socket_context = NULL;
        if (!w)
            return;
        pthread_mutex_lock(&srv->watch_mu);
        if (w->linked) {
            if (w->prev)
                w->prev->next = w->next;
            else if (srv->watch_head == w)
                srv->watch_head = w->next;
            if (w->next)
                w->next->prev = w->prev;
        }
        pthread_mutex_unlock(&srv->watch_mu);
        free(w);
    }
}

static serve_watch *watch_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (serve_watch *)ci->socket_context : NULL;
}

void serve_deadline_received(txc_server *srv, struct MHD_Connection *mc)
{
    serve_watch *w = watch_of(mc);
    if (!w)
        return;
    pthread_mutex_lock(&srv->watch_mu);
    w->receiving = false;
    pthread_mutex_unlock(&srv->watch_mu);
}

void serve_deadline_next(txc_server *srv, struct MHD_Connection *mc)
{
    serve_watch *w = watch_of(mc);
    if (!w)
        return;
    pthread_mutex_lock(&srv->watch_mu);
    w->receiving = true;
    w->t_start_ms = now_ms();
    pthread_mutex_unlock(&srv->watch_mu);
}

static void *watchdog_main(void *arg)
{
    txc_server *srv = arg;
    const double limit_ms = (double)srv->o.idle_timeout_s * 1e3;
    pthread_mutex_lock(&srv->watch_mu);
    while (!srv->watch_exit) {
        double t = now_ms();
        for (serve_watch *w = srv->watch_head; w; w = w->next)
            if (w->receiving && !w->shut && t - w->t_start_ms > limit_ms) {
                if (srv->o.verbose)
                    fprintf(stderr, "txc serve: a request still arriving after %u s (--timeout): connection closed\n",
                            srv->o.idle_timeout_s);
                shutdown(w->fd, SHUT_RDWR);
                w->shut = true;
            }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&srv->watch_cond, &srv->watch_mu, &ts);
    }
    pthread_mutex_unlock(&srv->watch_mu);
    return NULL;
}

txc_status serve_deadline_start(txc_server *srv)
{
    if (pthread_create(&srv->watchdog, NULL, watchdog_main, srv) != 0)
        return txc_error(TXC_ERR_NOMEM, "serve: cannot start the request deadline's thread");
    srv->watchdog_started = true;
    return TXC_OK;
}

void serve_deadline_stop(txc_server *srv)
{
    if (!srv->watchdog_started)
        return;
    pthread_mutex_lock(&srv->watch_mu);
    srv->watch_exit = true;
    pthread_cond_signal(&srv->watch_cond);
    pthread_mutex_unlock(&srv->watch_mu);
    pthread_join(srv->watchdog, NULL);
    srv->watchdog_started = false;
}
