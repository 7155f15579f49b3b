/* policy.c: placeholder until the policy module lands. */
typedef int policy_placeholder;
