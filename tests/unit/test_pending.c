// pending: tokens, arrival order, tombstones and compaction, the live bound,
// lookups by agent id, and the offered options.

#include "broker/pending.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "check.h"

static int conn_a, conn_b; // distinct addresses standing for connections

static uint64_t add(struct pending *p, void *conn, json_t *id,
                    const char *tool) {
  return pending_add(p, conn, id, xstrdup("sess"), xstrdup(tool), json_array(),
                     1000);
}

static void test_basics(void) {
  struct pending p;
  pending_init(&p, 4);
  is_int((int64_t)p.next_token, 1, "tokens start at 1");
  uint64_t t1 = add(&p, &conn_a, json_integer(0), "t1");
  uint64_t t2 = add(&p, &conn_a, json_integer(1), "t2");
  uint64_t t3 = add(&p, &conn_b, json_integer(0), "t3");
  ok(t1 == 1 && t2 == 2 && t3 == 3, "tokens are 1, 2, 3");
  is_size(pending_count(&p), 3, "three live entries");
  struct pending_entry *e = pending_find(&p, t2);
  is_str(e ? e->tool_call_id : NULL, "t2", "find returns the entry");
  ok(e && e->conn == &conn_a && e->added_ms == 1000 && e->live,
     "the entry keeps its fields");
  ok(!pending_find(&p, 0) && !pending_find(&p, 4), "unknown tokens: NULL");

  struct pending_entry out;
  ok(pending_take(&p, t2, &out), "take succeeds");
  is_str(out.tool_call_id, "t2", "take moves the entry out");
  is_str(out.session, "sess", "with its session");
  pending_entry_clear(&out);
  ok(!out.agent_id && !out.session && !out.tool_call_id && !out.options,
     "entry_clear releases and clears");
  ok(!pending_take(&p, t2, &out), "taking twice fails");
  ok(!pending_find(&p, t2), "find after take is NULL");
  is_size(pending_count(&p), 2, "two live entries left");
  is_str(pending_find(&p, t3)->tool_call_id, "t3", "later entries found");

  add(&p, &conn_a, json_integer(2), "t4");
  add(&p, &conn_a, json_integer(3), "t5");
  is_size(pending_count(&p), 4, "table full at max live entries");
  json_t *id = json_integer(9);
  json_incref(id);
  is_int((int64_t)add(&p, &conn_a, id, "t6"), 0, "add to a full table: 0");
  is_size(id->refcount, 1, "and it released the id it was given");
  json_decref(id);
  ok(!pending_take(&p, 6, &out), "no token was used up");
  ok(pending_take(&p, t1, &out), "after a take...");
  pending_entry_clear(&out);
  is_int((int64_t)add(&p, &conn_a, json_integer(4), "t6"), 6,
         "...add works again with the next token");
  pending_free(&p);
}

// The order of live entries in the table must stay the arrival order.
static bool in_order(const struct pending *p) {
  uint64_t last = 0;
  for (size_t i = 0; i < p->len; i++) {
    if (p->v[i].token <= last)
      return false;
    last = p->v[i].token;
  }
  return true;
}

static bool all_found(struct pending *p, const bool *taken, size_t n) {
  for (size_t t = 1; t <= n; t++)
    if ((pending_find(p, t) != NULL) == taken[t])
      return false;
  return true;
}

// Takes N entries in the order order[0..N) gives, checking as it goes.
static void take_all(const uint64_t *order, const char *desc) {
  enum { N = 10000 };
  struct pending p;
  pending_init(&p, N);
  for (size_t i = 0; i < N; i++)
    add(&p, &conn_a, json_integer((json_int_t)i), "t");
  bool *taken = xcalloc(N + 1, sizeof(*taken));
  bool good = pending_count(&p) == N, bounded = true;
  for (size_t i = 0; i < N && good; i++) {
    struct pending_entry out = {0};
    struct pending_entry *e = pending_find(&p, order[i]);
    good = e && e->token == order[i] &&
           json_integer_value(e->agent_id) == (json_int_t)order[i] - 1 &&
           pending_take(&p, order[i], &out) && !pending_find(&p, order[i]);
    pending_entry_clear(&out);
    taken[order[i]] = true;
    good = good && pending_count(&p) == N - i - 1;
    bounded = bounded && (p.len - p.live) * 2 <= p.len;
    if (i % 500 == 0)
      good = good && all_found(&p, taken, N) && in_order(&p);
  }
  ok(good, "%s: every entry found until taken, counts right", desc);
  ok(bounded, "%s: tombstones never exceed half the slots", desc);
  is_size(pending_count(&p), 0, "all taken");
  free(taken);
  pending_free(&p);
}

static void test_many(void) {
  enum { N = 10000 };
  uint64_t *order = xcalloc(N, sizeof(*order));
  for (size_t i = 0; i < N; i++)
    order[i] = i + 1;
  take_all(order, "FIFO");
  for (size_t i = 0; i < N; i++)
    order[i] = N - i;
  take_all(order, "LIFO");
  uint32_t x = 12345; // xorshift: the same shuffle on every run
  for (size_t i = N - 1; i > 0; i--) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    size_t j = x % (i + 1);
    uint64_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  take_all(order, "pseudo-random");
  free(order);
}

static void test_agent_id(void) {
  struct pending p;
  pending_init(&p, 16);
  uint64_t a0 = add(&p, &conn_a, json_integer(0), "a0");
  uint64_t as = add(&p, &conn_a, json_string("0"), "as");
  uint64_t b0 = add(&p, &conn_b, json_integer(0), "b0");
  uint64_t a0b = add(&p, &conn_a, json_integer(0), "a0-again");
  json_t *zero = json_integer(0), *szero = json_string("0");
  json_t *big = json_integer(INT64_MAX);
  struct pending_entry *e = pending_find_agent_id(&p, &conn_a, zero);
  ok(e && e->token == a0, "integer 0 on conn a: the oldest match");
  e = pending_find_agent_id(&p, &conn_a, szero);
  ok(e && e->token == as, "string \"0\" is a different id");
  e = pending_find_agent_id(&p, &conn_b, zero);
  ok(e && e->token == b0, "the same id on another connection is separate");
  ok(!pending_find_agent_id(&p, &conn_b, szero), "no \"0\" on conn b");
  ok(!pending_find_agent_id(&p, &conn_a, big), "unknown id: NULL");
  ok(!pending_find_agent_id(&p, &conn_a, NULL), "NULL id: NULL");
  struct pending_entry out;
  pending_take(&p, a0, &out);
  pending_entry_clear(&out);
  e = pending_find_agent_id(&p, &conn_a, zero);
  ok(e && e->token == a0b, "taken entries are skipped");
  json_decref(zero);
  json_decref(szero);
  json_decref(big);
  pending_free(&p); // frees the live entries: valgrind checks it
}

static void test_options(void) {
  struct pending p;
  pending_init(&p, 2);
  json_t *opts = json_loads(
      "[42, null, {\"optionId\":\"x\"},"
      " {\"optionId\":1,\"name\":\"n\",\"kind\":\"allow_once\"},"
      " {\"optionId\":\"bad\",\"name\":\"n\",\"kind\":3},"
      " {\"optionId\":\"noname\",\"kind\":\"allow_once\"},"
      " {\"optionId\":\"a1\",\"name\":\"Allow\",\"kind\":\"allow_once\"},"
      " {\"optionId\":\"a2\",\"name\":\"Allow too\",\"kind\":\"allow_once\"},"
      " {\"optionId\":\"r1\",\"name\":\"Reject\",\"kind\":\"reject_once\"}]",
      0, NULL);
  uint64_t t = pending_add(&p, &conn_a, json_integer(1), xstrdup("s"),
                           xstrdup("c"), json_incref(opts), 0);
  // Only what an answer needs is kept: the agent's objects are released.
  is_int((int64_t)opts->refcount, 1, "the options array is not kept");
  json_array_clear(opts); // what the entry keeps does not point into it
  json_decref(opts);
  const struct pending_entry *e = pending_find(&p, t);
  is_size(e->noptions, 3, "the three well-formed options are kept");
  const struct pending_option *o = pending_first_of_kind(e, "allow_once");
  is_str(o ? o->id : NULL, "a1",
         "first of kind: the first well-formed one wins");
  o = pending_first_of_kind(e, "reject_once");
  is_str(o ? o->id : NULL, "r1", "first of another kind");
  is_str(o ? o->kind : NULL, "reject_once", "with its kind");
  ok(!pending_first_of_kind(e, "allow_always"), "absent kind: NULL");
  o = pending_offered(e, "a2");
  ok(o && strcmp(o->id, "a2") == 0 && strcmp(o->kind, "allow_once") == 0,
     "offered finds a later duplicate kind by id");
  ok(!pending_offered(e, "x"), "malformed option (no name/kind) skipped");
  ok(!pending_offered(e, "bad"), "malformed option (kind not string) skipped");
  ok(!pending_offered(e, "noname"), "malformed option (no name) skipped");
  ok(!pending_offered(e, "zz") && !pending_offered(e, NULL),
     "unknown or NULL id: NULL");

  t = pending_add(&p, &conn_a, json_integer(2), xstrdup("s"), xstrdup("c"),
                  json_object(), 0);
  e = pending_find(&p, t);
  ok(!pending_offered(e, "a1") && !pending_first_of_kind(e, "allow_once"),
     "options that are not an array offer nothing");

  // The table is full (max 2): the options are released all the same.
  opts = json_loads("[{\"optionId\":\"a\",\"name\":\"A\",\"kind\":"
                    "\"allow_once\"}]",
                    0, NULL);
  ok(pending_add(&p, &conn_a, json_integer(3), xstrdup("s"), xstrdup("c"),
                 json_incref(opts), 0) == 0,
     "a third entry is refused");
  is_int((int64_t)opts->refcount, 1, "its options are released");
  json_decref(opts);
  pending_free(&p);
}

// Options given as optionIds and kinds (the flat view's): copied, a NULL
// one left out; more options than the compiler's stack holds; a full table.
static void test_options_of(void) {
  struct pending p;
  pending_init(&p, 2);
  char id0[] = "a1", kind0[] = "allow_once";
  const char *ids[] = {id0, NULL, "r1", "x"};
  const char *kinds[] = {kind0, "allow_once", "reject_once", NULL};
  uint64_t t = pending_add_of(&p, &conn_a, json_integer(1), xstrdup("s"),
                              xstrdup("c"), ids, kinds, 4, 0);
  id0[0] = kind0[0] = 'z'; // the entry keeps copies
  const struct pending_entry *e = pending_find(&p, t);
  ok(e && e->noptions == 2, "two options kept of four (NULLs left out)");
  const struct pending_option *o = pending_offered(e, "a1");
  is_str(o ? o->kind : NULL, "allow_once", "the first, copied");
  o = pending_first_of_kind(e, "reject_once");
  is_str(o ? o->id : NULL, "r1", "the second");
  ok(!pending_offered(e, "x"), "an option without a kind is not kept");

  // Twenty options through the tree (more than the stack of sixteen).
  json_t *opts = json_array();
  for (int i = 0; i < 20; i++)
    json_array_append_new(opts,
                          json_pack("{s:s+,s:s,s:s}", "optionId", "o",
                                    i < 10 ? "a" : "b", "name", "N", "kind",
                                    i == 19 ? "reject_once" : "allow_always"));
  t = pending_add(&p, &conn_a, json_integer(2), xstrdup("s"), xstrdup("c"),
                  opts, 0);
  e = pending_find(&p, t);
  ok(e && e->noptions == 20, "twenty options kept");
  o = e ? pending_first_of_kind(e, "reject_once") : NULL;
  is_str(o ? o->id : NULL, "ob", "the last of them");

  ok(pending_add_of(&p, &conn_a, json_integer(3), xstrdup("s"), xstrdup("c"),
                    ids, kinds, 4, 0) == 0,
     "a full table refuses (and frees what it was given)");
  pending_free(&p);
}

int main(void) {
  test_basics();
  test_options_of();
  test_many();
  test_agent_id();
  test_options();
  return done_testing();
}
