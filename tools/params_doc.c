/* Prints docs/PARAMETERS.md from the schema table in pipeline/params.c:
 *     build/tools/params_doc > docs/PARAMETERS.md
 * The params_doc test fails when the committed file and this output differ. */
#include <stdio.h>

#include "pipeline/params.h"

int main(void)
{
    hp_params_write_markdown(stdout);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
