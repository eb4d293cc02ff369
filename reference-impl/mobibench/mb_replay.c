/* placeholder, replaced below */
#include "mb.h"
int mb_replay(const struct mb_config *cfg) { (void)cfg; return 1; }
