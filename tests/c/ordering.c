/*
 * ordering.c - non-overtaking: messages between one sender and one receiver
 * that match the same receive arrive in the order they were sent, whether
 * they are eager or rendezvous, expected or unexpected.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). In each pair (0,1), (2,3)
 * the even rank sends and the odd rank receives; the last rank of an
 * odd-sized job only joins the barriers.
 *
 * Message i (0 <= i < 1000) is 8 bytes for even i and 100 KiB for odd i; its
 * first 4 bytes are the sequence number i, the rest the pattern keyed i.
 * Variants:
 *   0. MPI_Send / MPI_Recv, one tag;
 *   1. tags alternating 1,1,1,2,2,2,...; the receiver uses MPI_ANY_TAG;
 *   2. all 1000 receives posted (MPI_Irecv) before the sends start (barrier);
 *   3. all 1000 sends started (MPI_Isend) and a barrier passed before the
 *      first receive is posted (the unexpected-message path), MPI_ANY_TAG;
 *   4. half the receives posted before, half after the sends (ANY_TAG).
 */
#include "check.h"

#define NAME "ordering"
#define NMSG 1000
#define SMALL 8
#define BIG (100 * 1024)

static int msg_size(int i) { return i % 2 ? BIG : SMALL; }
static int msg_tag(int i) { return (i / 3) % 2 + 1; }

static unsigned char *send_arena, *recv_arena;
static size_t send_off[NMSG];

static unsigned char *sendbuf_of(int i) { return send_arena + send_off[i]; }
static unsigned char *recvbuf_of(int i) { return recv_arena + (size_t)i * (BIG + TC_GUARD); }

static void prepare(unsigned char *buf, int src, int i)
{
    unsigned int seq = 0xFFFFFFFFU;
    memcpy(buf, &seq, sizeof seq);
    tc_prepare_recv(buf + 4, (size_t)msg_size(i) - 4, src, i);
}

static void check_msg(const unsigned char *buf, const MPI_Status *st, int src, int i, int anytag, const char *variant)
{
    unsigned int seq;
    char what[128];
    memcpy(&seq, buf, sizeof seq);
    snprintf(what, sizeof what, "%s: message %d", variant, i);
    if (seq != (unsigned int)i)
        tc_fail_eq(__FILE__, __LINE__, i, (int)seq, "%s: out of order: sequence number", what);
    tc_check_status(st, src, anytag ? msg_tag(i) : 1, msg_size(i), what);
    tc_check_recv(buf + 4, (size_t)msg_size(i) - 4, src, i, what);
}

static void send_all_blocking(int dest, int tagged)
{
    int i;
    for (i = 0; i < NMSG; i++)
        CHECK_MPI(MPI_Send(sendbuf_of(i), msg_size(i), MPI_BYTE, dest, tagged ? msg_tag(i) : 1, MPI_COMM_WORLD));
}

static void start_all(int dest, MPI_Request *reqs)
{
    int i;
    for (i = 0; i < NMSG; i++)
        CHECK_MPI(MPI_Isend(sendbuf_of(i), msg_size(i), MPI_BYTE, dest, msg_tag(i), MPI_COMM_WORLD, &reqs[i]));
}

static void recv_blocking(int src, int from, int to, int anytag, const char *variant)
{
    MPI_Status st;
    int i;
    for (i = from; i < to; i++) {
        unsigned char *buf = recvbuf_of(NMSG); /* a slot no posted receive uses */
        prepare(buf, src, i);
        CHECK_MPI(MPI_Recv(buf, BIG, MPI_BYTE, src, anytag ? MPI_ANY_TAG : 1, MPI_COMM_WORLD, &st));
        check_msg(buf, &st, src, i, anytag, variant);
    }
}

static void post_recvs(int src, int n, int anytag, MPI_Request *reqs)
{
    int i;
    for (i = 0; i < n; i++) {
        prepare(recvbuf_of(i), src, i);
        CHECK_MPI(MPI_Irecv(recvbuf_of(i), BIG, MPI_BYTE, src, anytag ? MPI_ANY_TAG : 1, MPI_COMM_WORLD, &reqs[i]));
    }
}

static void check_posted(int src, int n, int anytag, const MPI_Status *sts, const char *variant)
{
    int i;
    for (i = 0; i < n; i++)
        check_msg(recvbuf_of(i), &sts[i], src, i, anytag, variant);
}

int main(int argc, char **argv)
{
    static MPI_Request reqs[NMSG];
    static MPI_Status sts[NMSG];
    int rank, nranks, partner, i;
    size_t total = 0;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    partner = tc_partner(rank, nranks);

    if (partner >= 0 && rank % 2 == 0) {
        /* sender: every message gets its own buffer, filled once */
        for (i = 0; i < NMSG; i++) {
            send_off[i] = total;
            total += (size_t)msg_size(i);
        }
        send_arena = tc_alloc(total);
        for (i = 0; i < NMSG; i++) {
            unsigned int seq = (unsigned int)i;
            memcpy(sendbuf_of(i), &seq, sizeof seq);
            tc_fill(sendbuf_of(i) + 4, (size_t)msg_size(i) - 4, rank, i);
        }

        send_all_blocking(partner, 0); /* 0 */
        send_all_blocking(partner, 1); /* 1 */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* 2 */
        send_all_blocking(partner, 0);
        start_all(partner, reqs); /* 3 */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Waitall(NMSG, reqs, sts));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* 4 */
        start_all(partner, reqs);
        CHECK_MPI(MPI_Waitall(NMSG, reqs, sts));
        free(send_arena);
    } else if (partner >= 0) {
        /* receiver */
        recv_arena = malloc((size_t)(NMSG + 1) * (BIG + TC_GUARD));
        CHECK(recv_arena != NULL, "malloc of the receive buffers");

        recv_blocking(partner, 0, NMSG, 0, "variant 0 (Send/Recv)");
        recv_blocking(partner, 0, NMSG, 1, "variant 1 (ANY_TAG)");

        post_recvs(partner, NMSG, 0, reqs);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Waitall(NMSG, reqs, sts));
        check_posted(partner, NMSG, 0, sts, "variant 2 (receives posted first)");

        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        tc_sleep_ms(20);
        recv_blocking(partner, 0, NMSG, 1, "variant 3 (unexpected messages, ANY_TAG)");

        post_recvs(partner, NMSG / 2, 1, reqs);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        tc_sleep_ms(20);
        recv_blocking(partner, NMSG / 2, NMSG, 1, "variant 4 (half posted, half unexpected)");
        CHECK_MPI(MPI_Waitall(NMSG / 2, reqs, sts));
        check_posted(partner, NMSG / 2, 1, sts, "variant 4 (half posted, half unexpected)");
        free(recv_arena);
    } else {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    if (rank == 0)
        printf("%d messages x 5 variants arrived in order\n", NMSG);
    return tc_finish(NAME);
}
