#include "../../../tests/unit.h"
int main(void){CHECK(1);return unit_done();}
